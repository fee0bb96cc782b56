/** The additive-noise mechanisms: laplace and gaussian, exact discrete noise on a grid. */
import { gaussian } from "../gaussian.js";
import { laplace } from "../laplace.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { laplace, gaussian };
