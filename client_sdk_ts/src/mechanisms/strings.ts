/** Device factories of this group (cms, hcms, pem, sfp, multi, pckv), by mechanism name. */
import type { MechanismFactory } from "./types.js";

export const STRINGS_FACTORIES: Readonly<Record<string, MechanismFactory>> = {};
