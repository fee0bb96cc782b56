/**
 * The single-module browser build (dist/browser-full.js): the Node entry's exports without the
 * folder storage, every mechanism, shuffled campaigns and secure aggregation in one ES module
 * (`FACTORIES` and the synchronous `mechanismFromConfig`), for pages recording many kinds of
 * campaign in one fetch; dist/browser.js instead fetches the code of each mechanism when a
 * campaign first needs it. Node's entry (index.ts) is this module and the folder storage.
 */
export * from "./exports.js";
export { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
// Every module is at hand: the code of shuffled campaigns (the policy's amplification bound, the
// sealing key) is registered at import (dist/browser.js loads it with a shuffled campaign's
// document).
import { registerShuffled } from "./client.js";
import * as shuffled from "./shuffled.js";
registerShuffled(shuffled);
export { cloneDelta, numericalEpsilon } from "./amplification.js";
