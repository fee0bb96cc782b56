/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1). */
export { CryptoWordSource, HmacWordSource, type WordSource } from "./words.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
export type { Mechanism, MechanismConfig, MechanismFactory, PerturbOptions } from "./mechanisms/types.js";
