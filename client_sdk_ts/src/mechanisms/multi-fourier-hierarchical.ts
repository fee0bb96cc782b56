/**
 * Device factories of this group (multi, fourier, hierarchical), by mechanism name: the
 * multidimensional and range mechanisms, which reuse the categorical oracles.
 */
import { fourier } from "./fourier.js";
import { hierarchical } from "./hierarchical.js";
import { Multi } from "./multi.js";
import type { MechanismFactory } from "./types.js";

export const MULTI_FOURIER_HIERARCHICAL_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  multi: (config) => new Multi(config),
  fourier,
  hierarchical,
};
