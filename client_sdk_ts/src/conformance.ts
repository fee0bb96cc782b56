/**
 * Running the conformance vectors (docs/protocol.md, "Conformance vectors"): each case is one
 * report, `payload == toWire(perturb([value], {rng: HmacWordSource(words_key), keys}))[0]`, the
 * keys being the device secret's under the scope of (campaign, config) when the case has them.
 */
import { type JsonValue, parseJson, toPlain } from "./config.js";
import { DeviceKeys, memoScope } from "./memoization.js";
import { FACTORIES, mechanismFromConfig } from "./mechanisms/registry.js";
import type { Mechanism, MechanismConfig } from "./mechanisms/types.js";
import { fromHex } from "./wire.js";
import { HmacWordSource } from "./words.js";

export interface VectorCase {
  config: MechanismConfig;
  /** The config as parsed with its floats kept (`parseJson`), for the memo scope. */
  configJson: JsonValue;
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

/** A case object as `parseJson` reads it. */
type RawCase = Record<string, JsonValue>;

function vectorOf(raw: RawCase): Omit<VectorCase, "value" | "payload"> {
  const out: Omit<VectorCase, "value" | "payload"> = {
    config: toPlain(raw.config) as MechanismConfig,
    configJson: raw.config as JsonValue,
    wordsKey: raw.words_key as string,
  };
  if (typeof raw.campaign === "string") out.campaign = raw.campaign;
  if (typeof raw.device_secret === "string") out.deviceSecret = raw.device_secret;
  return out;
}

/** A vector file's content, its configs kept with their floats. */
export function parseVectorFile(text: string): VectorFile {
  const file = parseJson(text) as { mechanism: string; cases: RawCase[] };
  if (!Array.isArray(file.cases)) throw new TypeError("a vector file needs a list of cases");
  return {
    mechanism: file.mechanism,
    cases: file.cases.map((c) => ({ ...vectorOf(c), value: toPlain(c.value), payload: toPlain(c.payload) })),
  };
}

/** True when this SDK registers the file's mechanism. */
export function isPorted(mechanism: string): boolean {
  return Object.hasOwn(FACTORIES, mechanism);
}

/** The payloads this SDK makes for `values` reported together from one word stream. */
export function runBatch(
  vector: Omit<VectorCase, "value" | "payload">,
  values: readonly unknown[],
  compact = false,
): unknown[] {
  const mechanism = mechanismFromConfig(vector.config);
  const rng = new HmacWordSource(fromHex(vector.wordsKey, "words_key"));
  const options =
    vector.deviceSecret !== undefined && vector.campaign !== undefined
      ? { rng, keys: new DeviceKeys(fromHex(vector.deviceSecret, "device_secret"), memoScope(vector.campaign, vector.configJson)) }
      : { rng };
  if (compact) {
    const sampler = (mechanism as { perturbCompact?: Mechanism["perturb"] }).perturbCompact;
    if (sampler === undefined) throw new TypeError(`${mechanism.name} has no compact sampler`);
    return mechanism.toWire(sampler.call(mechanism, values, options));
  }
  return mechanism.toWire(mechanism.perturb(values, options));
}

/** The payload this SDK makes for one case. */
export function runCase(vector: VectorCase): unknown {
  return runBatch(vector, [vector.value])[0];
}

/**
 * Batches in the vectors' case format with `"values"` (a list) in place of `"value"`: a JSON list
 * of {config, values, words_key, campaign?, device_secret?, compact?}; the payload list of each
 * (`"compact": true`: the mechanism's `perturbCompact`, Python's `perturb_compact`).
 */
export function runBatchFile(text: string): unknown[][] {
  const cases = parseJson(text);
  if (!Array.isArray(cases)) throw new TypeError("a batch file is a list of cases");
  return (cases as RawCase[]).map((c, i) => {
    const values = toPlain(c.values);
    if (!Array.isArray(values)) throw new TypeError(`batch ${i}: values must be a list; got ${typeof values}`);
    return runBatch(vectorOf(c), values, c.compact === true);
  });
}
