/** hcms (a group apart from cms: each page carries only its own sketch). */
import { Hcms } from "../sketch.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { hcms: (config) => new Hcms(config) };
