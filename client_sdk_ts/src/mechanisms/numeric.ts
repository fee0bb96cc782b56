/** Device factories of this group (duchi, piecewise, hybrid, laplace, gaussian, onebitmean, square_wave), by mechanism name. */
import { duchi } from "./duchi.js";
import { gaussian } from "./gaussian.js";
import { hybrid } from "./hybrid.js";
import { laplace } from "./laplace.js";
import { oneBitMean } from "./onebitmean.js";
import { piecewise } from "./piecewise.js";
import { squareWave } from "./square_wave.js";
import type { MechanismFactory } from "./types.js";

export const NUMERIC_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  duchi,
  piecewise,
  hybrid,
  laplace,
  gaussian,
  onebitmean: oneBitMean,
  square_wave: squareWave,
};
