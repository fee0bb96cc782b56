/** pem (string discovery) and pckv (key-value records). */
import { Pckv } from "../pckv.js";
import { Pem } from "../pem.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { pem: (config) => new Pem(config), pckv: (config) => new Pckv(config) };
