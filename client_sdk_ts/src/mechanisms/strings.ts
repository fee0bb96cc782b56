/** Device factories of this group (cms, hcms, pem, sfp, multi, pckv), by mechanism name. */
import { Cms, Hcms } from "./sketch.js";
import type { MechanismFactory } from "./types.js";

export const STRINGS_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  cms: (config) => new Cms(config),
  hcms: (config) => new Hcms(config),
};
