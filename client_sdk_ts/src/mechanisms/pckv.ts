/**
 * PCKV: key-value records with padding-and-sampling, then GRR (default) or UE (Gu, Li, Cheng,
 * Xiong & Cao, "PCKV: Locally Differentially Private Correlated Key-Value Data Collection with
 * Optimized Utility", USENIX Security 2020; docs/protocol.md, "Structures"; Python:
 * client_sdk/mechanisms/pckv.py).
 */
import type { WordSource } from "../words.js";
import { Rational, WORD_SPAN, expDouble, probabilityThreshold } from "../rational.js";
import { bernoulliLazy, randomBits, uniformBelow } from "../samplers.js";
import { base64Url, bitsText, packBits, widestInt } from "../wire.js";
import {
  checkKeys,
  configEpsilon,
  configInt,
  refuseKeys,
  typeName,
  wordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const MAX_K = 1 << 16;
/** Bits randomized per chunk of UE rows (Python's ``unary.CHUNK_BITS``: the words' order). */
const CHUNK_BITS = 1 << 23;
const FIELDS = ["epsilon", "k", "padding"];
const PADDING_ADVICE =
  "padding (l, an integer >= 1) is required: a record is padded to l pairs and one is sampled, so a device " +
  "holding more than l pairs has its keys under-counted (Gu et al., USENIX Security 2020); there is no safe " +
  "default: choose about the 99th percentile of the number of pairs a device holds";

/** The double just below x towards 0 (Python's ``math.nextafter(x, 0.0)``, x > 0). */
function nextBelow(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** The largest double below 2^64 (Python's ``math.nextafter(2.0**64, 0.0)``). */
const BELOW_TWO_64 = nextBelow(2 ** 64);

/** A double at most e^x (Python's ``grid.exp_below``): the probabilities are built from it. */
function expBelow(x: number): number {
  return nextBelow(expDouble(x));
}

/** A key-value record: key index (an integer in [0, k), as an object's decimal key) -> number in [-1, 1]. */
export type KeyValueRecord = Readonly<Record<string, number>> | ReadonlyMap<number, number>;

/** A report: 2·key + [sign = +1] (GRR), or the plus and minus rows over k + l keys (UE). */
export type PckvReport = number | readonly [Uint8Array, Uint8Array];

export class Pckv implements Mechanism<KeyValueRecord, PckvReport> {
  readonly name = "pckv";
  readonly valueKind = "record";
  readonly epsilon: number;
  readonly k: number;
  readonly padding: number;
  readonly ue: boolean;
  /** (keep key, keep sign, other key nonzero) thresholds, rounded towards less information. */
  readonly thresholds: readonly [bigint, bigint, bigint];

  constructor(config: MechanismConfig) {
    if (config.padding === undefined) throw new TypeError(`config for "pckv" is missing padding: ${PADDING_ADVICE}`);
    checkKeys(config, "pckv", FIELDS, ["variant"]);
    this.epsilon = configEpsilon(config);
    this.k = configInt(config, "k", 2, MAX_K);
    this.padding = configInt(config, "padding", 1, MAX_K);
    const variant = config.variant;
    if (variant !== undefined && variant !== null && variant !== "grr" && variant !== "ue") {
      throw new RangeError(`variant must be "grr" or "ue"; got ${typeName(variant)}`);
    }
    this.ue = variant === "ue";
    this.thresholds = this.#thresholds();
  }

  /** k + l: real and dummy keys. */
  get keys(): number {
    return this.k + this.padding;
  }

  /** GRR: a = (l(e-1) + 2)/(l(e-1) + 2K) and p = (l(e-1) + 1)/(l(e-1) + 2), both down; UE:
   * a = 1/2, p = e/(e + 1) down, b = 2/(e + 3) up (e = exp_below(epsilon)). */
  #thresholds(): [bigint, bigint, bigint] {
    const e = Rational.fromDouble(expBelow(this.epsilon));
    if (this.ue) {
      return [
        WORD_SPAN / 2n,
        probabilityThreshold(e.div(e.add(1n)), "down"),
        probabilityThreshold(new Rational(2n).div(e.add(3n)), "up"),
      ];
    }
    const el = e.sub(1n).mul(BigInt(this.padding));
    const a = el.add(2n).div(el.add(BigInt(2 * this.keys)));
    const p = el.add(1n).div(el.add(2n));
    return [probabilityThreshold(a, "down"), probabilityThreshold(p, "down"), 0n];
  }

  /** A record's pairs in ascending key order (the canonical order), checked. */
  pairs(record: unknown, position: number): [number, number][] {
    let entries: [unknown, unknown][];
    if (record instanceof Map) entries = [...record.entries()];
    else if (record !== null && typeof record === "object" && !Array.isArray(record)) entries = Object.entries(record);
    else throw new TypeError(`values[${position}] must be an object key index -> number; got ${typeName(record)}`);
    const out: [number, number][] = entries.map(([key, number]) => {
      const index = typeof key === "string" && /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : key;
      if (typeof index !== "number" || !Number.isSafeInteger(index) || index < 0 || index >= this.k) {
        throw new RangeError(
          `values[${position}] has a key that is not an integer in [0, ${this.k}) (a ${typeName(key)})`,
        );
      }
      if (typeof number !== "number" || !Number.isFinite(number) || number < -1 || number > 1) {
        throw new RangeError(`values[${position}]: each key's number must be in [-1, 1]; got ${typeName(number)}`);
      }
      return [index, number];
    });
    return out.sort((a, b) => a[0] - b[0]);
  }

  /** What the device counts about its records (never sent): those with more pairs than
   * ``padding``, whose keys the estimates under-count. */
  deviceCounters(values: readonly KeyValueRecord[]): { pckv_records_over_padding: number } {
    const sizes = values.map((record, position) => this.pairs(record, position).length);
    return { pckv_records_over_padding: sizes.filter((size) => size > this.padding).length };
  }

  perturb(values: readonly KeyValueRecord[], options?: PerturbOptions): PckvReport[] {
    if (!Array.isArray(values)) throw new TypeError(`values must be an array of records; got ${typeName(values)}`);
    const records = values.map((record, position) => this.pairs(record, position));
    refuseKeys(options, this.name);
    const rng = wordSource(options);
    const n = records.length;
    const slots = uniformBelow(
      rng,
      records.map((pairs) => Math.max(pairs.length, this.padding)),
      n,
    ).map(Number);
    const dummy = uniformBelow(rng, this.padding, n).map((d) => Number(d) + this.k);
    const chosen = records.map((pairs, i): [number, number] => {
      const slot = slots[i] as number;
      return slot < pairs.length ? (pairs[slot] as [number, number]) : [dummy[i] as number, 0];
    });
    const plusWords = rng.words(n);
    const plus = chosen.map(([, number], i) => {
      // the float64 product, as Python computes it, capped below 2^64
      const scaled = Math.min(Math.floor(((1 + number) / 2) * 2 ** 64), BELOW_TWO_64);
      return (plusWords[i] as bigint) < BigInt(scaled) || number >= 1;
    });
    const keepSign = rng.words(n);
    const sign = plus.map((p, i) => ((keepSign[i] as bigint) < this.thresholds[1] ? p : !p));
    if (this.ue) return this.#ue(chosen.map(([key]) => key), sign, rng);
    const keep = rng.words(n);
    const other = uniformBelow(rng, this.keys - 1, n).map(Number);
    const randomSign = uniformBelow(rng, 2, n).map(Number);
    return chosen.map(([key], i) => {
      const kept = (keep[i] as bigint) < this.thresholds[0];
      const o = other[i] as number;
      const outKey = kept ? key : o < key ? o : o + 1;
      const outSign = kept ? sign[i] : randomSign[i] === 1;
      return 2 * outKey + (outSign ? 1 : 0);
    });
  }

  /** UE rows, chunk by chunk: every key nonzero w.p. b with a uniform sign, then the sampled
   * key nonzero w.p. 1/2 carrying its sign. */
  #ue(keys: readonly number[], sign: readonly boolean[], rng: WordSource): PckvReport[] {
    const width = this.keys;
    const step = Math.max(1, Math.floor(CHUNK_BITS / (2 * width)));
    const out: PckvReport[] = [];
    for (let start = 0; start < keys.length; start += step) {
      const m = Math.min(keys.length, start + step) - start;
      const nonzero = bernoulliLazy(rng, this.thresholds[2], m * width);
      const positive = randomBits(rng, m * width);
      const sampled = randomBits(rng, m);
      for (let r = 0; r < m; r++) {
        const key = keys[start + r] as number;
        nonzero[r * width + key] = sampled[r] as boolean;
        positive[r * width + key] = sign[start + r] as boolean;
        const rowNonzero = nonzero.slice(r * width, (r + 1) * width);
        const rowPositive = positive.slice(r * width, (r + 1) * width);
        out.push([
          packBits(rowNonzero.map((z, j) => z && (rowPositive[j] as boolean))),
          packBits(rowNonzero.map((z, j) => z && !(rowPositive[j] as boolean))),
        ]);
      }
    }
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): number | [string, string] {
    return this.ue ? [bitsText(this.keys), bitsText(this.keys)] : widestInt(0, 2 * this.keys);
  }

  toWire(reports: readonly PckvReport[]): (number | [string, string])[] {
    return reports.map((r) => (typeof r === "number" ? r : [base64Url(r[0]), base64Url(r[1])]));
  }
}
