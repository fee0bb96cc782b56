/** The device registry: a mechanism name to its factory (Python: `client_sdk.mechanisms.registry`). */
import { FACTORIES as BOUNDED } from "./groups/bounded.js";
import { FACTORIES as CATEGORICAL } from "./groups/categorical.js";
import { FACTORIES as CATEGORICAL_ROWS } from "./groups/categorical-rows.js";
import { FACTORIES as CMS } from "./groups/cms.js";
import { FACTORIES as FOURIER_HIERARCHICAL } from "./groups/fourier-hierarchical.js";
import { FACTORIES as HCMS } from "./groups/hcms.js";
import { FACTORIES as LAPLACE_GAUSSIAN } from "./groups/laplace-gaussian.js";
import { FACTORIES as MULTI } from "./groups/multi.js";
import { FACTORIES as PEM_PCKV } from "./groups/pem-pckv.js";
import { FACTORIES as RAPPOR_DBITFLIP } from "./groups/rappor-dbitflip.js";
import { FACTORIES as SFP } from "./groups/sfp.js";
import { mechanismName, registerFactories } from "./loader.js";
import type { Mechanism, MechanismConfig, MechanismFactory } from "./types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  ...CATEGORICAL,
  ...CATEGORICAL_ROWS,
  ...RAPPOR_DBITFLIP,
  ...BOUNDED,
  ...LAPLACE_GAUSSIAN,
  ...CMS,
  ...HCMS,
  ...SFP,
  ...PEM_PCKV,
  ...MULTI,
  ...FOURIER_HIERARCHICAL,
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
