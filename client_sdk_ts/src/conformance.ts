/**
 * Running the conformance vectors (docs/protocol.md, "Conformance vectors"): each case is one
 * report, `payload == toWire(perturb([value], {rng: HmacWordSource(words_key), keys}))[0]`, the
 * keys being the device secret's under the scope of (campaign, config) when the case has them.
 */
import { type JsonTree, parseJsonTree, treeMember, treeValue } from "./canonical.js";
import { DeviceKeys, memoScope } from "./memoization.js";
import { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
import type { MechanismConfig } from "./mechanisms/types.js";
import { fromHex } from "./wire.js";
import { HmacWordSource } from "./words.js";

export interface VectorCase {
  config: MechanismConfig;
  /** The config's JSON tree (floats kept), for the memo scope. */
  configTree: JsonTree;
  value: unknown;
  wordsKey: string;
  payload: unknown;
  campaign?: string;
  deviceSecret?: string;
}

export interface VectorFile {
  mechanism: string;
  cases: VectorCase[];
}

/** A vector file's content, its configs kept as trees. */
export function parseVectorFile(text: string): VectorFile {
  const tree = parseJsonTree(text);
  const plain = treeValue(tree) as { mechanism: string; cases: Record<string, unknown>[] };
  const caseTrees = treeMember(tree, "cases");
  if (caseTrees?.kind !== "array" || !Array.isArray(plain.cases)) throw new TypeError("a vector file needs a list of cases");
  return {
    mechanism: plain.mechanism,
    cases: plain.cases.map((c, i) => {
      const out: VectorCase = {
        config: c.config as MechanismConfig,
        configTree: treeMember(caseTrees.items[i]!, "config")!,
        value: c.value,
        wordsKey: c.words_key as string,
        payload: c.payload,
      };
      if (typeof c.campaign === "string") out.campaign = c.campaign;
      if (typeof c.device_secret === "string") out.deviceSecret = c.device_secret;
      return out;
    }),
  };
}

/** True when this SDK registers the file's mechanism. */
export function isPorted(mechanism: string): boolean {
  return Object.hasOwn(FACTORIES, mechanism);
}

/** The payload this SDK makes for one case. */
export function runCase(vector: VectorCase): unknown {
  const mechanism = mechanismFromConfig(vector.config);
  const rng = new HmacWordSource(fromHex(vector.wordsKey, "words_key"));
  const options =
    vector.deviceSecret !== undefined && vector.campaign !== undefined
      ? { rng, keys: new DeviceKeys(fromHex(vector.deviceSecret, "device_secret"), memoScope(vector.campaign, vector.configTree)) }
      : { rng };
  return mechanism.toWire(mechanism.perturb([vector.value], options))[0];
}
