/** sfp, the sequence fragment puzzle. */
import { Sfp } from "../sfp.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { sfp: (config) => new Sfp(config) };
