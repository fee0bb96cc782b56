/** The means on a bounded interval: duchi, piecewise, hybrid, onebitmean, square_wave. */
import { duchi } from "../duchi.js";
import { hybrid } from "../hybrid.js";
import { oneBitMean } from "../onebitmean.js";
import { piecewise } from "../piecewise.js";
import { squareWave } from "../square_wave.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { duchi, piecewise, hybrid, onebitmean: oneBitMean, square_wave: squareWave };
