/** The categorical oracles whose reports are numbers (grr, olh, blh, hr), each with its memoized variant. */
import { blhFactory, grrFactory, hrFactory, olhFactory } from "../categorical.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { grr: grrFactory, olh: olhFactory, blh: blhFactory, hr: hrFactory };
