/**
 * The browser bundle's entry (dist/browser.js): the package's exports without Node's folder
 * storage. Each mechanism group is a chunk loaded when a campaign first needs it, so
 * `mechanismFromConfig` here builds the mechanisms of loaded groups (`loadMechanism` loads one).
 */
export * from "./exports.js";
export { mechanismFromLoaded as mechanismFromConfig } from "./mechanisms/loader.js";
