/** ldp-telemetry: the device SDK of the local-DP telemetry system (protocol 1): every module of
 * the single-module browser build (browser-full.ts) and Node's folder storage. */
export * from "./browser-full.js";
export { FolderStorage } from "./storage-node.js";
