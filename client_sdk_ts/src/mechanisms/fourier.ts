/**
 * Fourier marginals over binary attributes (Cormode, Kulkarni & Srivastava, SIGMOD 2018;
 * Python: client_sdk/mechanisms/fourier.py; docs/protocol.md, "Structures"): the device's
 * coefficient c (an attribute set of at most `order` members, by size then lexicographically)
 * from the keyed source, the parity of the record's bits over it, sent kept with probability
 * e^eps/(e^eps + 1) (a threshold rounded down). Payload: [c, bit].
 */
import { expRational, probabilityThreshold } from "../rational.js";
import { bernoulli, uniformBelow } from "../samplers.js";
import { ConfigReader, checkValueList } from "./bounded.js";
import { widestInt } from "../wire.js";
import {
  checkKeys,
  wordSource,
} from "./fields.js";
import { type Attribute, encodeRecord, parseAttributes } from "./attributes.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";


const MAX_ORDER = 8;
const MAX_COEFFICIENTS = 1 << 20;
const COEFFICIENT_LABEL = "fourier:coefficient";

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
  readonly valueKind = "record";
  /** The sampled coefficient: one per device and campaign from the keyed source. */
  readonly usesDeviceChoices = true;
  readonly attributes: Attribute[];
  readonly sets: number[][];
  readonly keepThreshold: bigint;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "attributes"], ["order"]);
    const reader = new ConfigReader(config, this.name);
    const epsilon = reader.epsilon();
    this.attributes = parseAttributes(config["attributes"], true);
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

  /** The widest payload (Python: `largest_wire_payload`): [coefficient, bit]. */
  largestWirePayload(): [number, number] {
    return [widestInt(0, this.sets.length), 1];
  }

  toWire(reports: readonly [number, number][]): unknown[] {
    return reports.map(([c, bit]) => [c, bit]);
  }
}

/** `{"mechanism": "fourier", "epsilon", "attributes": [{"name", "labels"?}, ...], "order"}`. */
export function fourier(config: MechanismConfig): Mechanism {
  return new Fourier(config) as Mechanism;
}
