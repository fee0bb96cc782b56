/** cms (a group apart from hcms: each page carries only its own sketch). */
import { Cms } from "../sketch.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { cms: (config) => new Cms(config) };
