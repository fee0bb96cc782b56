/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1). */
export * from "./exports.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
export { FolderStorage } from "./storage-node.js";
// Node has every module at hand: the code of shuffled campaigns (the policy's amplification
// bound, the sealing key) is registered at import (browsers load it with a shuffled campaign's
// document).
import { registerShuffled } from "./client.js";
import * as shuffled from "./shuffled.js";
registerShuffled(shuffled);
export { cloneDelta, numericalEpsilon } from "./amplification.js";
