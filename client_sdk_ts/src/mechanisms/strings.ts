/** Device factories of this group (cms, hcms, pem, sfp, pckv), by mechanism name. */
import { Pckv } from "./pckv.js";
import { Pem } from "./pem.js";
import { Sfp } from "./sfp.js";
import { Cms, Hcms } from "./sketch.js";
import type { MechanismFactory } from "./types.js";

export const STRINGS_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  cms: (config) => new Cms(config),
  hcms: (config) => new Hcms(config),
  pem: (config) => new Pem(config),
  pckv: (config) => new Pckv(config),
  sfp: (config) => new Sfp(config),
};
