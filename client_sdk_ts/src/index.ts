/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1). */
export * from "./exports.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
export { FolderStorage } from "./storage-node.js";
// Node has every module at hand: the policy's amplification bound is registered at import
// (browsers load it with a shuffled campaign's document).
import { AMPLIFICATION } from "./amplification.js";
import { registerAmplification } from "./policy.js";
registerAmplification(AMPLIFICATION);
export { cloneDelta, numericalEpsilon } from "./amplification.js";
