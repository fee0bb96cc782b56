/**
 * Apple's count-mean sketch and its one-bit Hadamard variant (Apple Differential Privacy Team,
 * "Learning with Privacy at Scale", 2017): ``cms`` and ``hcms``, plain and memoized
 * (docs/protocol.md, "Strings" and "Memoized variants"; Python: client_sdk/mechanisms/sketch.py).
 */
import type { WordSource } from "../words.js";
import { MAX_WORD, WORD_SPAN, Rational, expRational, probabilityThreshold, thresholdProbability } from "../rational.js";
import { bernoulliLazy, uniformBelow32 } from "../samplers.js";
import { base64Url, bitsText, packBits, widestInt } from "../wire.js";
import type { KeyedSource } from "../memoization.js";
import { deviceChoice, largestThreshold, requireKeys } from "../memo-chain.js";
import { checkKeys, configEpsilon, configInt, configPermanent, refuseKeys, stringValues, wordSource } from "./fields.js";
import { SketchHash, countReserved, distinctStrings, memoLabel, parity, representable, stringMemoKeys } from "./string-support.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const SKETCH_FIELDS = ["epsilon", "m", "hashes", "max_length", "seed"];
/** Cells randomized per chunk of CMS rows (Python's ``CHUNK_CELLS``: the words' order). */
const CHUNK_CELLS = 1 << 23;

/** The parsed fields of a sketch config. */
export interface SketchShape {
  readonly epsilon: number;
  readonly m: number;
  readonly hashes: number;
  readonly maxLength: number;
  readonly seed: number;
}

/** Reads and checks a cms/hcms config (the fields the canonical config carries). */
export function sketchShape(config: MechanismConfig): SketchShape {
  checkKeys(config, config.mechanism, SKETCH_FIELDS, ["longitudinal"]);
  const epsilon = configEpsilon(config);
  const m = configInt(config, "m", 2, 65536);
  if ((m & (m - 1)) !== 0) throw new RangeError(`m must be a power of two; got ${m}`);
  return {
    epsilon,
    m,
    hashes: configInt(config, "hashes", 1, 16),
    maxLength: configInt(config, "max_length", 1, 1024),
    seed: configInt(config, "seed", 0, 2 ** 53 - 1),
  };
}

/** The flip threshold of a sketch: 1/(1 + e^(eps/2)) for cms, 1/(1 + e^eps) for hcms, up. */
export function flipThreshold(epsilon: number, signsDiffering: 1 | 2): bigint {
  const e = expRational(signsDiffering === 2 ? epsilon / 2 : epsilon);
  return probabilityThreshold(new Rational(1n).div(e.add(1n)), "up");
}

/** The instantaneous step's keep threshold (Python's ``strings.flip_again_threshold``): the
 * largest T with ((1 - q')/q')^s <= e^eps, q' = q1·p2 + (1 - q1)(1 - p2), p2 = T/2^64. */
export function flipAgainThreshold(permanentFlip: bigint, epsilon: number, power: 1 | 2): bigint {
  const q1 = thresholdProbability(permanentFlip);
  const ratio = (threshold: bigint): Rational => {
    const keep = thresholdProbability(threshold);
    const q = q1.mul(keep).add(new Rational(1n).sub(q1).mul(new Rational(1n).sub(keep)));
    return new Rational(1n).sub(q).div(q).pow(power);
  };
  return largestThreshold(ratio, WORD_SPAN / 2n, MAX_WORD, expRational(epsilon));
}

/** A CMS report: the row and its m bits, packed. */
export interface CmsReport {
  readonly row: number;
  readonly bits: Uint8Array;
}

/** Count-mean sketch: a row, then the m signs of the value's one-hot column, each flipped. */
export class Cms implements Mechanism<string, CmsReport> {
  readonly name = "cms";
  readonly valueKind = "string";
  readonly shape: SketchShape;
  readonly flipThreshold: bigint;
  /** With ``"longitudinal"``: the permanent flip threshold and the flip-again keep threshold. */
  readonly memo?: { readonly permanentFlip: bigint; readonly keep: bigint };
  /** Under ``"longitudinal"``: the row is the device's, each string's m signs memoized. */
  readonly memoized: boolean;
  /** Memoized: epsilon_permanent, what all reports of one string reveal (its PRR). */
  readonly epsilonInf?: number;
  /** The sketch's hash family at (hashes, m, seed). */
  readonly hash: SketchHash;

  constructor(config: MechanismConfig) {
    this.shape = sketchShape(config);
    this.hash = new SketchHash(this.shape.hashes, this.shape.m, this.shape.seed);
    this.flipThreshold = flipThreshold(this.shape.epsilon, 2);
    const permanent = configPermanent(config, this.shape.epsilon);
    if (permanent !== undefined) {
      const permanentFlip = flipThreshold(permanent, 2);
      this.memo = { permanentFlip, keep: flipAgainThreshold(permanentFlip, this.shape.epsilon, 2) };
      this.epsilonInf = permanent;
    }
    this.memoized = this.memo !== undefined;
  }

  memoKeys(values: readonly string[], keys: KeyedSource): string[] {
    return stringMemoKeys(values, keys, this.name, (v) => representable(v, this.shape.maxLength));
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): { row: number; bits: string } {
    return { row: widestInt(0, this.shape.hashes), bits: bitsText(this.shape.m) };
  }

  perturb(values: readonly string[], options?: PerturbOptions): CmsReport[] {
    const { m, hashes, maxLength } = this.shape;
    const { encoded, inverse } = distinctStrings(stringValues(values), (v) => representable(v, maxLength));
    const rng = wordSource(options);
    const n = inverse.length;
    if (this.memo !== undefined) {
      const keys = requireKeys(options?.keys, this.name);
      const row = deviceChoice(keys, "cms:row", hashes);
      const memo = this.memo;
      const table = this.hash.table(encoded);
      // each string's permanent m signs (its own keyed stream: the same for every report of it)
      const permanent = encoded.map((raw, slot) => {
        const bits = packBits(bernoulliLazy(keys.source(memoLabel("", raw), 0), memo.permanentFlip, m));
        flipBit(bits, table[hashes * slot + row] as number);
        return bits;
      });
      const again = this.#chunkedFlips(rng, WORD_SPAN - memo.keep, n);
      return again.map((bits, i) => {
        const own = permanent[inverse[i] as number] as Uint8Array;
        for (let b = 0; b < bits.length; b++) bits[b] = (bits[b] as number) ^ (own[b] as number);
        return { row, bits };
      });
    }
    refuseKeys(options, this.name);
    const rows = hashes > 1 ? uniformBelow32(rng, hashes, n) : new Array<number>(n).fill(0);
    const buckets = this.hash.buckets(encoded, inverse, rows);
    return this.#chunkedFlips(rng, this.flipThreshold, n).map((bits, i) => {
      flipBit(bits, buckets[i] as number);
      return { row: rows[i] as number, bits };
    });
  }

  /** How many of ``values`` are sent as the reserved symbol. */
  reservedCount(values: readonly string[]): number {
    return countReserved(stringValues(values), this.shape.maxLength);
  }

  /** n rows of m Bernoulli(T) bits, packed, drawn as Python draws them (chunks of 2^23 cells). */
  #chunkedFlips(rng: WordSource, threshold: bigint, n: number): Uint8Array[] {
    const { m } = this.shape;
    const step = Math.max(1, Math.floor(CHUNK_CELLS / m));
    const out: Uint8Array[] = [];
    for (let start = 0; start < n; start += step) {
      const count = Math.min(n, start + step) - start;
      const flat = bernoulliLazy(rng, threshold, count * m);
      for (let r = 0; r < count; r++) out.push(packBits(flat, r * m, m));
    }
    return out;
  }

  toWire(reports: readonly CmsReport[]): { row: number; bits: string }[] {
    return reports.map((r) => ({ row: r.row, bits: base64Url(r.bits) }));
  }
}

/** Hadamard count-mean sketch: a row, a Hadamard column and one flipped sign (an integer). */
export class Hcms implements Mechanism<string, number> {
  readonly name: string = "hcms";
  readonly valueKind = "string";
  readonly shape: SketchShape;
  readonly flipThreshold: bigint;
  readonly memo?: { readonly permanentFlip: bigint; readonly keep: bigint };
  /** Under ``"longitudinal"``: the row and column are the device's, each string's sign memoized. */
  readonly memoized: boolean;
  /** Memoized: epsilon_permanent, what all reports of one string reveal (its PRR). */
  readonly epsilonInf?: number;
  /** The sketch's hash family at (hashes, m, seed). */
  readonly hash: SketchHash;

  /** From a config, or (``part``: SFP's word sketch) from parsed fields and epsilon_permanent. */
  constructor(config: MechanismConfig, part?: { shape: SketchShape; permanent: number | undefined }) {
    this.shape = part?.shape ?? sketchShape(config);
    this.hash = new SketchHash(this.shape.hashes, this.shape.m, this.shape.seed);
    this.flipThreshold = flipThreshold(this.shape.epsilon, 1);
    const permanent = part === undefined ? configPermanent(config, this.shape.epsilon) : part.permanent;
    if (permanent !== undefined) {
      this.memo = hcmsMemo(permanent, this.shape.epsilon);
      this.epsilonInf = permanent;
    }
    this.memoized = this.memo !== undefined;
  }

  memoKeys(values: readonly string[], keys: KeyedSource): string[] {
    return stringMemoKeys(values, keys, this.name, (v) => representable(v, this.shape.maxLength));
  }

  /** The widest payload (Python: `largest_wire_payload`): an integer below 2·hashes·m. */
  largestWirePayload(): number {
    return widestInt(0, 2 * this.shape.hashes * this.shape.m);
  }

  perturb(values: readonly string[], options?: PerturbOptions): number[] {
    const { hashes, maxLength } = this.shape;
    const { encoded, inverse } = distinctStrings(stringValues(values), (v) => representable(v, maxLength));
    const rng = wordSource(options);
    if (this.memo !== undefined) {
      const permanent = this.permanentReports(encoded, inverse, requireKeys(options?.keys, this.name), "");
      return this.flipAgain(permanent, rng);
    }
    refuseKeys(options, this.name);
    const n = inverse.length;
    const rows = hashes > 1 ? uniformBelow32(rng, hashes, n) : new Array<number>(n).fill(0);
    return this.perturbBuckets(this.hash.buckets(encoded, inverse, rows), rows, rng);
  }

  /** How many of ``values`` are sent as the reserved symbol. */
  reservedCount(values: readonly string[]): number {
    return countReserved(stringValues(values), this.shape.maxLength);
  }

  /** Plain HCMS reports of values hashed to ``buckets`` in the given rows: columns, then
   * flips, from rng. */
  perturbBuckets(buckets: Int32Array, rows: readonly number[], rng: WordSource): number[] {
    const { m } = this.shape;
    const columns = uniformBelow32(rng, m, buckets.length);
    const flips = bernoulliLazy(rng, this.flipThreshold, buckets.length);
    return columns.map((column, i) => {
      const plus = parity((buckets[i] as number) & column) === 0;
      return ((rows[i] as number) * m + column) * 2 + (plus !== flips[i] ? 1 : 0);
    });
  }

  /** The memoized PRRs of values given as an index into distinct ``encoded``: the device's row
   * and column, each string's sign flip from its memo stream; ``prefix`` namespaces every label
   * (SFP's ``sfp/word/``). */
  permanentReports(encoded: readonly Uint8Array[], inverse: Int32Array, keys: KeyedSource, prefix: string): number[] {
    const memo = this.memo;
    if (memo === undefined) throw new Error(`${this.name}: not memoized`);
    const { m, hashes } = this.shape;
    const row = deviceChoice(keys, `${prefix}hcms:row`, hashes);
    const column = deviceChoice(keys, `${prefix}hcms:column`, m);
    const table = this.hash.table(encoded);
    const distinct = encoded.map((raw, slot) => {
      const plus = parity((table[hashes * slot + row] as number) & column) === 0;
      const flip = bernoulliLazy(keys.source(prefix + memoLabel("", raw), 0), memo.permanentFlip, 1)[0];
      return (row * m + column) * 2 + (plus !== flip ? 1 : 0);
    });
    return Array.from(inverse, (slot) => distinct[slot] as number);
  }

  /** The instantaneous step: each sign flipped again with probability 1 - p2. */
  flipAgain(permanent: readonly number[], rng: WordSource): number[] {
    const memo = this.memo;
    if (memo === undefined) throw new Error(`${this.name}: not memoized`);
    const flips = bernoulliLazy(rng, WORD_SPAN - memo.keep, permanent.length);
    return permanent.map((report, i) => report ^ (flips[i] ? 1 : 0));
  }

  toWire(reports: readonly number[]): number[] {
    return reports.map((r) => r);
  }
}

/** The memoized HCMS thresholds at (epsilon_permanent, epsilon). */
export function hcmsMemo(permanent: number, epsilon: number): { permanentFlip: bigint; keep: bigint } {
  const permanentFlip = flipThreshold(permanent, 1);
  return { permanentFlip, keep: flipAgainThreshold(permanentFlip, epsilon, 1) };
}

/** Flips bit ``i`` of packed bits (the sign of the value's bucket). */
function flipBit(bits: Uint8Array, i: number): void {
  bits[i >> 3] = (bits[i >> 3] as number) ^ (0x80 >> (i & 7));
}
