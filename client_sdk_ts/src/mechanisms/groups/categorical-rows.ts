/** The categorical oracles whose reports are bit rows (sue, oue, ss), each with its memoized variant. */
import { oueFactory, ssFactory, sueFactory } from "../categorical.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { sue: sueFactory, oue: oueFactory, ss: ssFactory };
