/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1). */
export * from "./exports.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
export { FolderStorage } from "./storage-node.js";
