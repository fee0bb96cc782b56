/** The device registry: a mechanism name to its factory (Python: `client_sdk.mechanisms.registry`). */
import { CATEGORICAL_FACTORIES, RAPPOR_DBITFLIP_FACTORIES } from "./categorical.js";
import { mechanismName, registerFactories } from "./loader.js";
import { MULTI_FOURIER_HIERARCHICAL_FACTORIES } from "./multi-fourier-hierarchical.js";
import { NUMERIC_FACTORIES } from "./numeric.js";
import { STRINGS_FACTORIES } from "./strings.js";
import type { Mechanism, MechanismConfig, MechanismFactory } from "./types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  ...CATEGORICAL_FACTORIES,
  ...RAPPOR_DBITFLIP_FACTORIES,
  ...NUMERIC_FACTORIES,
  ...STRINGS_FACTORIES,
  ...MULTI_FOURIER_HIERARCHICAL_FACTORIES,
};
// Whoever imports the registry has every group loaded: the client builds their mechanisms at once.
registerFactories(FACTORIES);

/**
 * The device mechanism of a canonical config; refuses a mechanism this version cannot randomize.
 * Synchronous, with every group's code; `loadMechanism` (loader.ts) loads only the group it needs.
 */
export function mechanismFromConfig(config: MechanismConfig): Mechanism {
  return (FACTORIES[mechanismName(config)] as MechanismFactory)(config);
}
