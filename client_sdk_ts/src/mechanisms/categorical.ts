/** Device factories of this group (grr, sue, oue, ss, olh, blh, hr, dbitflip, rappor), by mechanism name. */
import type { MechanismFactory } from "./types.js";

export const CATEGORICAL_FACTORIES: Readonly<Record<string, MechanismFactory>> = {};
