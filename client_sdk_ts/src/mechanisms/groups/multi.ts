/** multi, the multidimensional mechanism (its units reuse the oracles of categorical.ts). */
import { Multi } from "../multi.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { multi: (config) => new Multi(config) };
