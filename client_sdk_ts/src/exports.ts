/**
 * The exports the Node entry (index.ts) and the browser bundle (browser.ts) share; each adds only
 * what differs: Node's synchronous registry and folder storage.
 */
export { CryptoWordSource, HmacWordSource, type WordSource } from "./words.js";
export { loadMechanism, MECHANISM_GROUPS } from "./mechanisms/loader.js";
export type { Mechanism, MechanismConfig, MechanismFactory, PerturbOptions } from "./mechanisms/types.js";
export { canonicalJson, configId, JsonFloat, parseCampaignDocument, parseJson, PROTOCOL_VERSION, pythonFloatRepr } from "./config.js";
export type { BudgetPolicy, CampaignDocument } from "./config.js";
export { DEFAULT_POLICY, PolicyViolation, PrivacyPolicy, type PrivacyPolicyOptions } from "./policy.js";
export { BudgetExceededError } from "./ledger.js";
export { TelemetryClient, type LastError, type TelemetryClientOptions } from "./client.js";
export { IndexedDBStorage, MemoryStorage, type StateStorage } from "./storage.js";
