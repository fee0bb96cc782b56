/** Device factories of this group (cms, hcms, pem, sfp, multi, pckv), by mechanism name. */
import { Multi } from "./multi.js";
import { Pckv } from "./pckv.js";
import { Pem } from "./pem.js";
import { Sfp } from "./sfp.js";
import { Cms, Hcms } from "./sketch.js";
import type { MechanismFactory } from "./types.js";

export const STRINGS_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  cms: (config) => new Cms(config),
  hcms: (config) => new Hcms(config),
  pem: (config) => new Pem(config),
  multi: (config) => new Multi(config),
  pckv: (config) => new Pckv(config),
  sfp: (config) => new Sfp(config),
};
