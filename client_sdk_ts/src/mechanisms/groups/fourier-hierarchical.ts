/** The range and marginal mechanisms: fourier, hierarchical. */
import { fourier } from "../fourier.js";
import { hierarchical } from "../hierarchical.js";
import type { MechanismFactory } from "../types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = { fourier, hierarchical };
