/** Device factories of this group (duchi, piecewise, hybrid, laplace, gaussian, onebitmean, square_wave, hierarchical, fourier), by mechanism name. */
import type { MechanismFactory } from "./types.js";

export const NUMERIC_FACTORIES: Readonly<Record<string, MechanismFactory>> = {};
