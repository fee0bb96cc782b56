/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1). */
export { CryptoWordSource, HmacWordSource, type WordSource } from "./words.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
export type { Mechanism, MechanismConfig, MechanismFactory, PerturbOptions } from "./mechanisms/types.js";
export { canonicalJson, configId, JsonFloat, parseCampaignDocument, parseJson, PROTOCOL_VERSION, pythonFloatRepr } from "./config.js";
export type { BudgetPolicy, CampaignDocument } from "./config.js";
export { DEFAULT_POLICY, PolicyViolation, PrivacyPolicy, type PrivacyPolicyOptions } from "./policy.js";
export { BudgetExceededError } from "./ledger.js";
export { TelemetryClient, type LastError, type TelemetryClientOptions } from "./client.js";
export { IndexedDBStorage, MemoryStorage, type StateStorage } from "./storage.js";
export { FolderStorage } from "./storage-node.js";
