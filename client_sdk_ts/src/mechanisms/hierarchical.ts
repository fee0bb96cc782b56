/**
 * Range queries over [0, k): the B-ary hierarchical histogram (Cormode, Kulkarni & Srivastava,
 * PVLDB 2019) and its Haar-wavelet variant (Python: client_sdk/mechanisms/hierarchical.py;
 * docs/protocol.md, "Structures"). The device's level comes from the keyed source (or, without
 * one, from the report's words). B-ary: the value's node at that level through the level's
 * oracle, GRR or OUE, whichever has the smaller total variance (Wang et al., USENIX Security
 * 2017). Haar: a random Hadamard row j of the level and the binary randomized response of the
 * node's coefficient sign.
 */
import { expBelow } from "../exact-math.js";
import { Rational, probabilityThreshold } from "../rational.js";
import { bernoulli, uniformBelow } from "../samplers.js";
import type { KeyedSource } from "../memoization.js";
import type { WordSource } from "../words.js";
import { ConfigReader } from "./bounded.js";
import { widestInt } from "../wire.js";
import {
  categoryValues,
  widestPayload,
  wordSource,
} from "./fields.js";
import { GRR, UnaryEncoding } from "./categorical.js";
import { checkKeys } from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const MAX_K = 1 << 11;
const MAX_BRANCHING = 16;
const HAAR = "haar";

/** h = the least h >= 1 with B^h >= k. */
export function treeHeight(k: number, branching: number): number {
  let h = 1;
  for (let size = branching; size < k; size *= branching) h += 1;
  return h;
}

/** The B in [2, 16] with the smallest (B - 1) h_B^2, ties to the smaller B. */
export function bestBranching(k: number): number {
  let best = 2;
  let bestScore = Infinity;
  for (let b = 2; b <= MAX_BRANCHING; b++) {
    const score = (b - 1) * treeHeight(k, b) ** 2;
    if (score < bestScore) {
      best = b;
      bestScore = score;
    }
  }
  return best;
}

/** Levels 1..h for n reports: the device's one level, or i.i.d. uniform from the words. */
function deviceLevels(n: number, height: number, label: string, rng: WordSource, keys: KeyedSource | undefined): number[] {
  if (keys !== undefined) {
    const level = Number(uniformBelow(keys.source(label, 0), BigInt(height), 1)[0]) + 1;
    return new Array<number>(n).fill(level);
  }
  return uniformBelow(rng, BigInt(height), n).map((u) => Number(u) + 1);
}

/** The total variance k q(1-q)/(p-q)^2 + (1-p-q)/(p-q) of a pure oracle (Wang et al. 2017). */
function totalVariance(p: number, q: number, k: number): number {
  return (k * q * (1 - q)) / (p - q) ** 2 + (1 - p - q) / (p - q);
}

/**
 * The level's oracle over `size` nodes: GRR or OUE, whichever has the smaller total variance at
 * its implemented probabilities (the thresholds over 2^64), a tie to GRR.
 */
function levelOracle(epsilon: number, size: number): GRR | UnaryEncoding {
  const grr = new GRR(epsilon, size);
  const oue = new UnaryEncoding("oue", epsilon, size);
  const pGrr = Number(grr.keepThreshold) / 2 ** 64;
  const [pOue, qOue] = oue.implemented.map((p) => p.toNumber()) as [number, number];
  const grrVariance = totalVariance(pGrr, (1 - pGrr) / (size - 1), size);
  return grrVariance <= totalVariance(pOue, qOue, size) ? grr : oue;
}

type RangeReport = [number, unknown];

class Hierarchical implements Mechanism<number, RangeReport> {
  readonly name = "hierarchical";
  readonly valueKind = "category";
  /** The level: one per device and campaign from the keyed source. */
  readonly usesDeviceChoices = true;
  readonly k: number;
  readonly branching: number;
  readonly height: number;
  readonly oracles: (GRR | UnaryEncoding)[];

  constructor(reader: ConfigReader) {
    const epsilon = reader.epsilon();
    this.k = reader.integer("k", 2, MAX_K);
    this.branching = reader.has("branching") ? reader.integer("branching", 2, MAX_BRANCHING) : bestBranching(this.k);
    this.height = treeHeight(this.k, this.branching);
    this.oracles = [];
    for (let level = 1; level <= this.height; level++) {
      this.oracles.push(levelOracle(epsilon, this.branching ** level));
    }
  }

  perturb(values: readonly number[], options?: PerturbOptions): RangeReport[] {
    const items = categoryValues(values, this.k);
    const rng = wordSource(options);
    const levels = deviceLevels(items.length, this.height, "hierarchical:level", rng, options?.keys);
    const out = new Array<RangeReport>(items.length);
    this.oracles.forEach((oracle, index) => {
      const level = index + 1;
      const rows = items.flatMap((_, i) => (levels[i] === level ? [i] : []));
      if (rows.length === 0) return;
      const divisor = this.branching ** (this.height - level);
      const nodes = rows.map((i) => Math.floor((items[i] as number) / divisor));
      const payloads: unknown[] =
        oracle instanceof GRR ? oracle.toWire(oracle.perturb(nodes, { rng })) : oracle.toWire(oracle.perturb(nodes, { rng }));
      rows.forEach((i, j) => {
        out[i] = [level, payloads[j]];
      });
    });
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`): a level and its oracle's widest report. */
  largestWirePayload(): RangeReport {
    return [widestInt(1, this.height + 1), widestPayload(this.oracles.map((o) => o.largestWirePayload()))];
  }

  toWire(reports: readonly RangeReport[]): unknown[] {
    return reports.map(([level, payload]) => [level, payload]);
  }
}

class HaarWavelet implements Mechanism<number, RangeReport> {
  readonly name = "hierarchical";
  readonly valueKind = "category";
  /** The level: one per device and campaign from the keyed source. */
  readonly usesDeviceChoices = true;
  readonly k: number;
  readonly height: number;
  readonly keepThreshold: bigint;

  constructor(reader: ConfigReader) {
    const epsilon = reader.epsilon();
    this.k = reader.integer("k", 2, MAX_K);
    this.height = Math.max(1, (this.k - 1).toString(2).length);
    const e = Rational.fromDouble(expBelow(epsilon));
    this.keepThreshold = probabilityThreshold(e.div(e.add(1n)), "down");
  }

  perturb(values: readonly number[], options?: PerturbOptions): RangeReport[] {
    const items = categoryValues(values, this.k);
    const rng = wordSource(options);
    const n = items.length;
    if (n === 0) return [];
    const levels = deviceLevels(n, this.height, "haar:level", rng, options?.keys);
    const rows = uniformBelow(
      rng,
      levels.map((level) => 1n << BigInt(level - 1)),
      n,
    ).map(Number);
    const keep = bernoulli(rng, this.keepThreshold, n);
    return items.map((item, i) => {
      const level = levels[i] as number;
      const shift = this.height - level;
      const node = item >> (shift + 1);
      const right = (item >> shift) & 1;
      const row = rows[i] as number;
      let parity = 0;
      for (let bits = row & node; bits !== 0; bits &= bits - 1) parity ^= 1;
      const truthMinus = parity ^ right;
      const sentMinus = keep[i] ? truthMinus : 1 - truthMinus;
      return [level, 2 * row + (1 - sentMinus)];
    });
  }

  /** The widest payload (Python: `largest_wire_payload`): a level and 2·row + sign. */
  largestWirePayload(): RangeReport {
    return [widestInt(1, this.height + 1), widestInt(0, 1 << this.height)];
  }

  toWire(reports: readonly RangeReport[]): unknown[] {
    return reports.map(([level, payload]) => [level, payload]);
  }
}

/**
 * `{"mechanism": "hierarchical", "epsilon", "k"}`, optionally `"branching"`; with
 * `"variant": "haar"` the Haar-wavelet mechanism.
 */
export function hierarchical(config: MechanismConfig): Mechanism {
  const reader = new ConfigReader(config, "hierarchical");
  checkKeys(config, "hierarchical", ["epsilon", "k"], [Object.hasOwn(config, "variant") ? "variant" : "branching"]);
  if (reader.has("variant")) {
    if (config["variant"] !== HAAR) reader.fail("variant", `"${HAAR}" (or omitted for the B-ary tree)`);
    return new HaarWavelet(reader) as Mechanism;
  }
  return new Hierarchical(reader) as Mechanism;
}
