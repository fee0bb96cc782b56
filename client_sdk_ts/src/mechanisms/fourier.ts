/**
 * Fourier marginals over binary attributes (Cormode, Kulkarni & Srivastava, SIGMOD 2018;
 * Python: client_sdk/mechanisms/fourier.py; docs/protocol.md, "Structures"): the device's
 * coefficient c (an attribute set of at most `order` members, by size then lexicographically)
 * from the keyed source, the parity of the record's bits over it, sent kept with probability
 * e^eps/(e^eps + 1) (a threshold rounded down). Payload: [c, bit].
 */
import { expRational, probabilityThreshold } from "../rational.js";
import { bernoulli, uniformBelow } from "../samplers.js";
import { ConfigReader, checkValueList, typeName, wordSource } from "./bounded.js";
import { checkKeys } from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";


const MAX_ATTRIBUTES = 64;
const MAX_ORDER = 8;
const MAX_COEFFICIENTS = 1 << 20;
const COEFFICIENT_LABEL = "fourier:coefficient";

/** A record attribute: its name and, optionally, its labels (index = the label's position). */
export interface Attribute {
  readonly name: string;
  readonly k: number;
  readonly labels: readonly string[] | null;
}

/** The config's attributes ({name, k?, labels?}), validated; errors name the entry and field. */
export function parseAttributes(mechanism: string, attributes: unknown, defaultK: number | null): Attribute[] {
  if (!Array.isArray(attributes) || attributes.length < 1 || attributes.length > MAX_ATTRIBUTES) {
    throw new RangeError(`${mechanism}: config.attributes must be a list of 1 to ${MAX_ATTRIBUTES} entries, got ${typeName(attributes)}`);
  }
  const parsed = attributes.map((entry: unknown, index): Attribute => {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      throw new TypeError(`${mechanism}: config.attributes[${index}] must be an object, got ${typeName(entry)}`);
    }
    const record = entry as Record<string, unknown>;
    const unknown = Object.keys(record).filter((key) => !["name", "k", "labels"].includes(key));
    if (unknown.length > 0) {
      throw new TypeError(`${mechanism}: config.attributes[${index}] has unknown field(s) ${unknown.sort().join(", ")}`);
    }
    const name = record["name"];
    if (typeof name !== "string" || name.length === 0 || name.length > 64) {
      throw new TypeError(`${mechanism}: config.attributes[${index}].name must be a non-empty string, got ${typeName(name)}`);
    }
    const k = record["k"] ?? defaultK;
    if (typeof k !== "number" || !Number.isSafeInteger(k) || k < 2) {
      throw new RangeError(`${mechanism}: config.attributes[${index}].k must be an integer >= 2, got ${typeName(k)}`);
    }
    const labels = record["labels"] ?? null;
    if (
      labels !== null &&
      (!Array.isArray(labels) ||
        labels.length !== k ||
        !labels.every((label) => typeof label === "string") ||
        new Set(labels).size !== k)
    ) {
      throw new RangeError(`${mechanism}: config.attributes[${index}].labels must be ${k} distinct strings`);
    }
    return { name, k, labels: labels as readonly string[] | null };
  });
  if (new Set(parsed.map((a) => a.name)).size !== parsed.length) {
    throw new RangeError(`${mechanism}: config.attributes' names must be distinct`);
  }
  return parsed;
}

/**
 * A record (an object attribute -> label, or -> index without labels) as its indices in the
 * config's attribute order; errors name the position and attribute, never the value.
 */
export function encodeRecord(attributes: readonly Attribute[], record: unknown, position: number): number[] {
  if (record === null || typeof record !== "object" || Array.isArray(record)) {
    throw new TypeError(`values[${position}] must be an object attribute -> value, got ${typeName(record)}`);
  }
  const entries = record as Record<string, unknown>;
  const unknown = Object.keys(entries).filter((key) => !attributes.some((a) => a.name === key));
  if (unknown.length > 0) {
    throw new RangeError(
      `values[${position}] has unknown attribute(s) ${unknown.slice(0, 3).map((key) => JSON.stringify(key)).join(", ")}; ` +
        `the attributes are ${attributes.map((a) => a.name).join(", ")}`,
    );
  }
  return attributes.map(({ name, k, labels }) => {
    if (!Object.hasOwn(entries, name)) throw new RangeError(`values[${position}] misses attribute ${JSON.stringify(name)}`);
    const value = entries[name];
    const code =
      labels !== null
        ? typeof value === "string"
          ? labels.indexOf(value)
          : -1
        : typeof value === "number" && Number.isSafeInteger(value) && value >= 0 && value < k
          ? value
          : -1;
    if (code < 0) {
      const what = labels !== null ? `one of its ${k} labels` : `an integer in [0, ${k})`;
      throw new RangeError(`values[${position}].${name} (a ${typeName(value)}) must be ${what}`);
    }
    return code;
  });
}

/** The attribute sets of sizes 1..order, each size lexicographically (itertools.combinations). */
function coefficientSets(d: number, order: number): number[][] {
  const out: number[][] = [];
  const extend = (prefix: number[], start: number, size: number): void => {
    if (prefix.length === size) {
      out.push([...prefix]);
      return;
    }
    for (let j = start; j < d; j++) extend([...prefix, j], j + 1, size);
  };
  for (let size = 1; size <= order; size++) extend([], 0, size);
  return out;
}

class Fourier implements Mechanism<Readonly<Record<string, unknown>>, [number, number]> {
  readonly name = "fourier";
  readonly attributes: Attribute[];
  readonly sets: number[][];
  readonly keepThreshold: bigint;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "attributes"], ["order"]);
    const reader = new ConfigReader(config, this.name);
    const epsilon = reader.epsilon();
    this.attributes = parseAttributes(this.name, config["attributes"], 2);
    this.attributes.forEach((a, index) => {
      if (a.k !== 2) {
        throw new RangeError(`fourier: config.attributes[${index}].k must be 2 (Fourier marginals are over binary attributes)`);
      }
    });
    const order = reader.has("order") ? reader.integer("order", 1, Math.min(MAX_ORDER, this.attributes.length)) : 2;
    const d = this.attributes.length;
    let count = 0;
    for (let size = 1, binomial = 1; size <= order; size++) {
      binomial = (binomial * (d - size + 1)) / size;
      count += binomial;
    }
    if (count > MAX_COEFFICIENTS) {
      throw new RangeError(`fourier: config.order ${order} gives ${count} coefficients, more than ${MAX_COEFFICIENTS}`);
    }
    this.sets = coefficientSets(d, order);
    const e = expRational(epsilon);
    this.keepThreshold = probabilityThreshold(e.div(e.add(1n)), "down");
  }

  perturb(values: readonly Readonly<Record<string, unknown>>[], options?: PerturbOptions): [number, number][] {
    const records = checkValueList(values).map((record, i) => encodeRecord(this.attributes, record, i));
    const rng = wordSource(options);
    const n = records.length;
    const total = BigInt(this.sets.length);
    const coefficients =
      options?.keys !== undefined
        ? new Array<number>(n).fill(Number(uniformBelow(options.keys.source(COEFFICIENT_LABEL, 0), total, 1)[0]))
        : uniformBelow(rng, total, n).map(Number);
    const keep = bernoulli(rng, this.keepThreshold, n);
    return records.map((x, i) => {
      const c = coefficients[i] as number;
      const parity = (this.sets[c] as number[]).reduce((sum, j) => sum + (x[j] as number), 0) % 2;
      return [c, keep[i] ? parity : 1 - parity];
    });
  }

  toWire(reports: readonly [number, number][]): unknown[] {
    return reports.map(([c, bit]) => [c, bit]);
  }
}

/** `{"mechanism": "fourier", "epsilon", "attributes": [{"name", "labels"?}, ...], "order"}`. */
export function fourier(config: MechanismConfig): Mechanism {
  return new Fourier(config) as Mechanism;
}
