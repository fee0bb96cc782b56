/** The device registry: a mechanism name to its factory (Python: `client_sdk.mechanisms.registry`). */
import { CATEGORICAL_FACTORIES } from "./categorical.js";
import { NUMERIC_FACTORIES } from "./numeric.js";
import { STRINGS_FACTORIES } from "./strings.js";
import type { Mechanism, MechanismConfig, MechanismFactory } from "./types.js";

export const FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  ...CATEGORICAL_FACTORIES,
  ...NUMERIC_FACTORIES,
  ...STRINGS_FACTORIES,
};

/** The device mechanism of a canonical config; refuses a mechanism this version cannot randomize. */
export function mechanismFromConfig(config: MechanismConfig): Mechanism {
  if (config === null || typeof config !== "object" || Array.isArray(config)) {
    throw new TypeError(`config must be an object, got ${config === null ? "null" : typeof config}`);
  }
  const name = config.mechanism;
  if (typeof name !== "string") {
    throw new TypeError(`config.mechanism must be a string, got ${typeof name}`);
  }
  const factory = Object.hasOwn(FACTORIES, name) ? FACTORIES[name] : undefined;
  if (factory === undefined) {
    throw new Error(
      `mechanism ${JSON.stringify(name)} is not supported in this version of ldp-telemetry ` +
        `(supported: ${Object.keys(FACTORIES).sort().join(", ")})`,
    );
  }
  return factory(config);
}
