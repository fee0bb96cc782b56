/**
 * The categorical frequency oracles on the device (docs/protocol.md, "Categorical frequency
 * oracles" and "Memoized variants"): grr, sue, oue, ss, olh, blh, hr, dbitflip, and rappor (its
 * strings are hashed into a Bloom filter), each drawing its words exactly as the Python SDK's
 * `perturb` does, so that the same words give the same payloads.
 */
import { md5 } from "@noble/hashes/legacy";
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { type BatchChain, chainThreshold, longitudinal, mixtureChain, requireKeys } from "../memo-chain.js";
import type { KeyedSource } from "../memoization.js";
import {
  MAX_WORD,
  Rational,
  WORD_SPAN,
  bitLength,
  expDouble,
  expRational,
  probabilityThreshold,
  thresholdProbability,
} from "../rational.js";
import {
  bernoulli,
  bernoulliBytes,
  bernoulliLazy,
  randomBits,
  sampleSubsets,
  uniformBelow,
  uniformBelow32,
  uniformBelowBits,
} from "../samplers.js";
import { bitsText, encodeBitRow, encodePackedRow, packBits, unpackBits, widestInt } from "../wire.js";
import type { WordSource } from "../words.js";
import {
  categoryValues,
  checkKeys,
  configBool,
  configEpsilon,
  configInt,
  configNumber,
  configObject,
  configPermanent,
  refuseKeys,
  rowsPerChunk,
  stringValues,
  wordSource,
} from "./fields.js";
import { nextDown } from "../exact-math.js";
import { logInt } from "./correctly-rounded.js";
import type { Mechanism, MechanismConfig, MechanismFactory, PerturbOptions } from "./types.js";

const ONE = new Rational(1n);
/** Largest k of a bit-row oracle and of the hashed ones (Python: `check_bit_vector_k`, `MAX_K`). */
const MAX_K = 2 ** 53 - 1;



/** Ranges over rows in chunks of `step`. */
function* chunks(n: number, step: number): Generator<[number, number]> {
  for (let start = 0; start < n; start += step) yield [start, Math.min(n, start + step)];
}

// ---- randomized response ---------------------------------------------------------------------

/**
 * Randomized response over [0, size) (Python: `keep_or_other`): keep = `bernoulli(T, n)`, then the
 * uniform others `uniformBelow(size - 1, n)` skipping each value; with size = 2 the other is
 * 1 - value and no word is drawn unless `drawForTwo` (GRR always draws).
 */
export function keepOrOther(
  rng: WordSource,
  values: readonly number[],
  keepThreshold: bigint,
  size: number,
  drawForTwo = false,
): number[] {
  const keep = bernoulli(rng, keepThreshold, values.length);
  if (size === 2 && !drawForTwo) return values.map((v, i) => (keep[i] ? v : 1 - v));
  const other = uniformBelow(rng, size - 1, values.length);
  return values.map((v, i) => {
    const o = Number(other[i]!);
    return keep[i] ? v : o + (o >= v ? 1 : 0);
  });
}

/**
 * Randomized response from fewer bits (Python: `keep_or_other_compact`): keep =
 * `bernoulliLazy(T, n)`, others `uniformBelow32(size - 1, n)` (none when size = 2).
 */
export function keepOrOtherCompact(rng: WordSource, values: readonly number[], keepThreshold: bigint, size: number): number[] {
  const keep = bernoulliLazy(rng, keepThreshold, values.length);
  if (size === 2) return values.map((v, i) => (keep[i] ? v : 1 - v));
  const other = uniformBelow32(rng, size - 1, values.length);
  return values.map((v, i) => {
    const o = other[i]!;
    return keep[i] ? v : o + (o >= v ? 1 : 0);
  });
}

/** The keep threshold e^eps/(e^eps + size - 1), rounded down (so p(size-1)/(1-p) <= e^eps). */
export function keepThreshold(epsilon: number, size: number): bigint {
  const e = expRational(epsilon);
  return probabilityThreshold(e.div(e.add(size - 1)), "down");
}

/** (P', Q') of randomized response with keep `first`, then again with `second`, over `size`. */
function composeKeep(first: Rational, second: Rational, size: number): [Rational, Rational] {
  const q1 = ONE.sub(first).div(size - 1);
  const q2 = ONE.sub(second).div(size - 1);
  return [first.mul(second).add(ONE.sub(first).mul(q2)), q1.mul(second).add(ONE.sub(q1).mul(q2))];
}

/** L-GRR's threshold: the largest keep T2 with P'/Q' <= target (Python: `RandomizedResponseChain`). */
export function randomizedResponseChainThreshold(permanentKeep: Rational, size: number, target: Rational): bigint {
  const ratio = (t: bigint): Rational => {
    const [big, small] = composeKeep(permanentKeep, thresholdProbability(t), size);
    return big.div(small);
  };
  const size64 = BigInt(size);
  return chainThreshold(ratio, [(WORD_SPAN + size64 - 1n) / size64, MAX_WORD], target); // from ceil(2^64/size)
}

// ---- grr -------------------------------------------------------------------------------------

/** k-ary randomized response: keep = one word, other = `uniformBelow(k - 1)` (drawn even for k = 2). */
export class GRR implements Mechanism<number, number> {
  readonly name = "grr";
  readonly valueKind = "category";
  readonly keepThreshold: bigint;

  constructor(
    readonly epsilon: number,
    readonly k: number,
  ) {
    this.keepThreshold = keepThreshold(epsilon, k);
  }

  perturb(values: readonly number[], options?: PerturbOptions): number[] {
    refuseKeys(options, this.name);
    return keepOrOther(wordSource(options), categoryValues(values, this.k), this.keepThreshold, this.k, true);
  }

  /** The same distribution from fewer words (Python: `perturb_compact`; multi's units use it). */
  perturbCompact(values: readonly number[], options?: PerturbOptions): number[] {
    refuseKeys(options, this.name);
    return keepOrOtherCompact(wordSource(options), categoryValues(values, this.k), this.keepThreshold, this.k);
  }

  /** The widest payload (Python: `largest_wire_payload`): sealed envelopes are padded to it. */
  largestWirePayload(): number {
    return widestInt(0, this.k);
  }

  toWire(reports: readonly number[]): number[] {
    return [...reports];
  }
}

// ---- sue, oue --------------------------------------------------------------------------------


/** Unary encoding: every bit `bernoulliLazy(T_q)`, then bit x `bernoulliLazy(T_p)`; packed rows. */
export class UnaryEncoding implements Mechanism<number, Uint8Array> {
  readonly valueKind = "category";
  readonly thresholds: readonly [bigint, bigint];

  constructor(
    readonly name: "sue" | "oue",
    readonly epsilon: number,
    readonly k: number,
  ) {
    let p: Rational;
    let q: Rational;
    if (name === "sue") {
      // half = e^(eps/2) as the largest float whose square does not exceed the float e^eps
      const bound = expRational(epsilon);
      let root = Math.sqrt(bound.toNumber());
      if (Rational.fromDouble(root).pow(2).cmp(bound) > 0) root = nextDown(root);
      const half = Rational.fromDouble(root);
      p = half.div(half.add(1n));
      q = ONE.div(half.add(1n));
    } else {
      p = new Rational(1n, 2n);
      q = ONE.div(expRational(epsilon).add(1n));
    }
    this.thresholds = [probabilityThreshold(p, "down"), probabilityThreshold(q, "up")];
  }

  /** The implemented (p, q). */
  get implemented(): [Rational, Rational] {
    return [thresholdProbability(this.thresholds[0]), thresholdProbability(this.thresholds[1])];
  }

  perturb(values: readonly number[], options?: PerturbOptions): Uint8Array[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const [p, q] = this.thresholds;
    const out: Uint8Array[] = [];
    for (const [start, stop] of chunks(x.length, rowsPerChunk(this.k))) {
      const rows = x.slice(start, stop);
      const bits = bernoulliLazy(rng, q, rows.length * this.k);
      const kept = bernoulliLazy(rng, p, rows.length);
      rows.forEach((v, r) => {
        bits[r * this.k + v] = kept[r]!;
        out.push(packBits(bits.slice(r * this.k, (r + 1) * this.k)));
      });
    }
    return out;
  }

  /**
   * The same distribution from fewer words (Python: `perturb_compact`): each row's bytes by
   * `bernoulliBytes(T_q)`, the pad bits cleared, then bit x = one `randomBits` bit when p is
   * exactly 1/2 (OUE), else `bernoulliLazy(T_p)`; blocks of about 2^23 bytes.
   */
  perturbCompact(values: readonly number[], options?: PerturbOptions): Uint8Array[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const [p, q] = this.thresholds;
    const width = Math.ceil(this.k / 8);
    const padMask = (0xff << (8 * width - this.k)) & 0xff;
    const out: Uint8Array[] = [];
    for (const [start, stop] of chunks(x.length, rowsPerChunk(width))) {
      const rows = x.slice(start, stop);
      const block = bernoulliBytes(rng, q, rows.length * width);
      const kept = p === WORD_SPAN / 2n ? randomBits(rng, rows.length) : bernoulliLazy(rng, p, rows.length);
      rows.forEach((v, r) => {
        const row = block.slice(r * width, (r + 1) * width);
        if (this.k % 8 !== 0) row[width - 1]! &= padMask;
        const mask = 0x80 >> (v & 7);
        row[v >> 3] = (row[v >> 3]! & ~mask) | (kept[r] ? mask : 0);
        out.push(row);
      });
    }
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): string {
    return bitsText(this.k);
  }

  toWire(reports: readonly Uint8Array[]): string[] {
    return reports.map((row) => encodePackedRow(row, this.k));
  }
}

/** L-UE: every permanent bit xor `bernoulliLazy(2^64 - T, k)` (Python: `BitFlipChain`). */
function bitFlipChain(inner: UnaryEncoding, target: Rational): BatchChain<Uint8Array> {
  const [p1, q1] = inner.implemented;
  const composed = (keep: Rational): [Rational, Rational] => [
    p1.mul(keep).add(ONE.sub(p1).mul(ONE.sub(keep))),
    q1.mul(keep).add(ONE.sub(q1).mul(ONE.sub(keep))),
  ];
  const ratio = (t: bigint): Rational => {
    const [big, small] = composed(thresholdProbability(t));
    return big.mul(ONE.sub(small)).div(small.mul(ONE.sub(big)));
  };
  const threshold = chainThreshold(ratio, [WORD_SPAN / 2n, MAX_WORD], target);
  const k = inner.k;
  return {
    kind: "l-ue",
    threshold,
    instantaneous(permanent, rng) {
      const out: Uint8Array[] = [];
      for (const [start, stop] of chunks(permanent.length, rowsPerChunk(k))) {
        const flips = bernoulliLazy(rng, WORD_SPAN - threshold, (stop - start) * k);
        for (let r = start; r < stop; r++) {
          const bits = unpackBits(permanent[r]!, k).map((bit, i) => bit !== flips[(r - start) * k + i]);
          out.push(packBits(bits));
        }
      }
      return out;
    },
  };
}

// ---- ss ----------------------------------------------------------------------------------------

const FLOYD_BLOCK_DRAWS = 2 ** 20;

/** Binomial coefficient C(n, r) as a BigInt. */
function comb(n: number, r: number): bigint {
  let out = 1n;
  for (let i = 0; i < r; i++) out = (out * BigInt(n - i)) / BigInt(i + 1);
  return out;
}

/** Subset selection: exactly d ones, x a member with probability p = d e^eps/(d e^eps + k - d). */
export class SubsetSelection implements Mechanism<number, Uint8Array> {
  readonly name = "ss";
  readonly valueKind = "category";
  readonly includeThreshold: bigint;

  constructor(
    readonly epsilon: number,
    readonly k: number,
    readonly d: number,
  ) {
    const e = expRational(epsilon);
    const de = e.mul(BigInt(d));
    this.includeThreshold = probabilityThreshold(de.div(de.add(BigInt(k - d))), "down");
  }

  /** (R, M) of the worst output column, exactly (Python: `SS.mixture_column_profile`). */
  columnProfile(): { high: Rational; mean: Rational } {
    const p = thresholdProbability(this.includeThreshold);
    const inside = p.div(comb(this.k - 1, this.d - 1));
    const outside = ONE.sub(p).div(comb(this.k - 1, this.d));
    const high = inside.div(outside);
    return { high, mean: high.mul(BigInt(this.d)).add(BigInt(this.k - this.d)).div(BigInt(this.k)) };
  }

  perturb(values: readonly number[], options?: PerturbOptions): Uint8Array[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const { k, d } = this;
    const include = bernoulli(rng, this.includeThreshold, x.length);
    const complement = 2 * d > k;
    const members = complement ? k - d : d;
    const out: Uint8Array[] = [];
    for (const [start, stop] of chunks(x.length, rowsPerChunk(k))) {
      const rows = x.slice(start, stop);
      const hasX = include.slice(start, stop).map((inc) => inc !== complement);
      for (const bitmap of floydBitmaps(rng, rows, hasX, members, k)) {
        out.push(packBits(complement ? bitmap.map((b) => !b) : bitmap));
      }
    }
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): string {
    return bitsText(this.k);
  }

  toWire(reports: readonly Uint8Array[]): string[] {
    return reports.map((row) => encodePackedRow(row, this.k));
  }
}

/**
 * Bitmaps with x set where `hasX`, plus uniform others up to `members` ones (Python:
 * `_floyd_bitmaps`): Floyd's algorithm over the k - 1 values other than x (index x stands for
 * value k - 1), all draws of a block of steps by one `uniformBelow32` call, step-major.
 */
function floydBitmaps(rng: WordSource, x: readonly number[], hasX: readonly boolean[], members: number, k: number): boolean[][] {
  const rows = x.length;
  const others = k - 1;
  const maps = x.map(() => new Array<boolean>(k).fill(false));
  const first = others - members;
  const block = Math.max(1, Math.floor(FLOYD_BLOCK_DRAWS / Math.max(rows, 1)));
  for (let blockStart = first; blockStart < others; blockStart += block) {
    const steps: number[] = [];
    for (let j = blockStart; j < Math.min(others, blockStart + block); j++) steps.push(j);
    const highs = steps.flatMap((j) => new Array<number>(rows).fill(j + 1));
    const draws = uniformBelow32(rng, highs, highs.length);
    steps.forEach((j, s) => {
      for (let r = 0; r < rows; r++) {
        if (j === first && hasX[r]) continue; // a row holding x needs one member fewer
        const t = draws[s * rows + r]!;
        maps[r]![maps[r]![t] ? j : t] = true;
      }
    });
  }
  return maps.map((map, r) => {
    const v = x[r]!;
    map[others] = map[v]!; // index x stands for value k - 1 (a no-op when x = k - 1)
    map[v] = hasX[r]!;
    return map;
  });
}

// ---- olh, blh ----------------------------------------------------------------------------------

export const HASH_PRIME = 2 ** 31 - 1;
const PRIME = BigInt(HASH_PRIME);
const SEED_SPACE = (PRIME - 1n) * PRIME;

/** h = ⌊g·((a·x + b) mod P) / P⌋ with a = seed div P + 1, b = seed mod P (Python: `local_hash`). */
export function localHash(seed: bigint, x: number, g: number): number {
  const a = seed / PRIME + 1n;
  const b = seed % PRIME;
  return Number((BigInt(g) * ((a * BigInt(x) + b) % PRIME)) / PRIME);
}

export interface HashedReport {
  seed: bigint;
  y: number;
}

/** Local hashing (OLH: g buckets; BLH: g = 2): a uniform seed, then randomized response over [g]. */
export class LocalHashing implements Mechanism<number, HashedReport> {
  readonly valueKind = "category";
  readonly keepThreshold: bigint;

  constructor(
    readonly name: "olh" | "blh",
    readonly epsilon: number,
    readonly k: number,
    readonly g: number,
  ) {
    this.keepThreshold = keepThreshold(epsilon, g);
  }

  perturb(values: readonly number[], options?: PerturbOptions): HashedReport[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const seeds = uniformBelow(rng, SEED_SPACE, x.length);
    const hashed = x.map((v, i) => localHash(seeds[i]!, v, this.g));
    const y = keepOrOther(rng, hashed, this.keepThreshold, this.g);
    return seeds.map((seed, i) => ({ seed, y: y[i]! }));
  }

  /**
   * The same distribution from fewer words (Python: `perturb_compact`): a - 1 =
   * `uniformBelowBits(P - 1)`, b = `uniformBelowBits(P)`, seed = (a - 1)·P + b, then
   * `keepOrOtherCompact` over [g].
   */
  perturbCompact(values: readonly number[], options?: PerturbOptions): HashedReport[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const aLessOne = uniformBelowBits(rng, HASH_PRIME - 1, x.length);
    const b = uniformBelowBits(rng, HASH_PRIME, x.length);
    const seeds = aLessOne.map((a, i) => BigInt(a) * PRIME + BigInt(b[i]!));
    const y = keepOrOtherCompact(
      rng,
      x.map((v, i) => localHash(seeds[i]!, v, this.g)),
      this.keepThreshold,
      this.g,
    );
    return seeds.map((seed, i) => ({ seed, y: y[i]! }));
  }

  /** The widest payload (Python: `largest_wire_payload`): the seed is always 16 hex digits. */
  largestWirePayload(): { seed: string; y: number } {
    return { seed: "0".repeat(16), y: widestInt(0, this.g) };
  }

  toWire(reports: readonly HashedReport[]): { seed: string; y: number }[] {
    return reports.map(({ seed, y }) => ({ seed: seed.toString(16).padStart(16, "0"), y }));
  }
}

// ---- hr ----------------------------------------------------------------------------------------

function parity(value: bigint): boolean {
  let bits = 0;
  for (let v = value; v !== 0n; v &= v - 1n) bits ^= 1;
  return bits === 1;
}

/** The unnormalized Walsh-Hadamard transform (Sylvester order) of integer values. */
function fwht(values: number[]): number[] {
  const out = [...values];
  for (let h = 1; h < out.length; h *= 2) {
    for (let i = 0; i < out.length; i += 2 * h) {
      for (let j = i; j < i + h; j++) {
        const a = out[j]!;
        const b = out[j + h]!;
        out[j] = a + b;
        out[j + h] = a - b;
      }
    }
  }
  return out;
}

/** Hadamard response over B blocks of b - 1 symbols (b = 2^bitlen(⌈k/B⌉)). */
export class HadamardResponse implements Mechanism<number, number> {
  readonly name = "hr";
  readonly valueKind = "category";
  readonly blockSize: number;
  readonly keepThreshold: bigint;

  constructor(
    readonly epsilon: number,
    readonly k: number,
    readonly blocks: number,
  ) {
    this.blockSize = 2 ** bitLength(BigInt(Math.ceil(k / blocks)));
    if ((this.blockSize - 1) * blocks < k) throw new RangeError(`blocks=${blocks} cannot hold k=${k}`);
    const e = expRational(epsilon);
    this.keepThreshold = probabilityThreshold(e.div(e.add(BigInt(2 * blocks - 1))), "down");
  }

  /** The least c >= 1 such that some output lies in exactly c symbols' half-sets. */
  fewestHolders(): number {
    const { k, blockSize: b } = this;
    const sizes = new Set<number>();
    for (let block = 0; block * (b - 1) < k; block++) sizes.add(Math.min(b - 1, k - block * (b - 1)));
    let fewest = k;
    for (const rows of sizes) {
      const indicator = Array.from({ length: b }, (_, i) => (i >= 1 && i <= rows ? 1 : 0));
      for (const t of fwht(indicator)) {
        const count = (rows + t) / 2;
        if (count >= 1 && count <= k - 1) fewest = Math.min(fewest, count);
      }
    }
    if (fewest >= k) throw new RangeError("no output of the Hadamard response separates two inputs");
    return fewest;
  }

  /** (R, M) of the worst output column, exactly (Python: `HR.mixture_column_profile`). */
  columnProfile(): { high: Rational; mean: Rational } {
    const p = thresholdProbability(this.keepThreshold);
    const half = BigInt(this.blockSize / 2);
    const alpha = p.div(half);
    const beta = ONE.sub(p).div(BigInt(2 * this.blocks - 1) * half);
    const high = alpha.div(beta);
    const c = this.fewestHolders();
    return { high, mean: high.mul(BigInt(c)).add(BigInt(this.k - c)).div(BigInt(this.k)) };
  }

  perturb(values: readonly number[], options?: PerturbOptions): number[] {
    refuseKeys(options, this.name);
    const x = categoryValues(values, this.k);
    const rng = wordSource(options);
    const b = this.blockSize;
    const n = x.length;
    const keep = bernoulli(rng, this.keepThreshold, n);
    const other =
      this.blocks === 1
        ? new Array<number>(n).fill(1)
        : uniformBelow(rng, 2 * this.blocks - 1, n).map((o, i) => {
            const v = Number(o);
            return v + (v >= 2 * Math.floor(x[i]! / (b - 1)) ? 1 : 0);
          });
    const offsets = rng.words(n);
    return x.map((v, i) => {
      const block = Math.floor(v / (b - 1));
      const row = BigInt((v % (b - 1)) + 1);
      const half = keep[i] ? 2 * block : other[i]!;
      let offset = offsets[i]! & BigInt(b - 1);
      if (parity(row & offset) !== ((half & 1) === 1)) offset ^= row & -row;
      return Math.floor(half / 2) * b + Number(offset);
    });
  }

  /** The widest payload (Python: `largest_wire_payload`): an output of the B * b. */
  largestWirePayload(): number {
    return widestInt(0, this.blocks * this.blockSize);
  }

  toWire(reports: readonly number[]): number[] {
    return [...reports];
  }
}

// ---- dbitflip ----------------------------------------------------------------------------------

const DBITFLIP_BUCKETS = "dbitflip/buckets";
const DBITFLIP_BITS = "dbitflip/bits";

export interface BucketReport {
  buckets: number[];
  bits: boolean[];
}

/** dBitFlip (Ding, Kulkarni & Yekhanin, NeurIPS 2017): d of k buckets, one bit each. */
export class DBitFlip implements Mechanism<number, BucketReport> {
  readonly name = "dbitflip";
  readonly valueKind = "category";
  readonly thresholds: readonly [bigint, bigint];

  constructor(
    readonly epsilon: number,
    readonly k: number,
    readonly d: number,
    readonly memoize: boolean,
  ) {
    const half = Rational.fromDouble(expDouble(epsilon / 2));
    const high = probabilityThreshold(half.div(half.add(1n)), "down");
    this.thresholds = [high, WORD_SPAN - high];
  }

  /** Memoized (the default): the buckets and each pattern's bits come from the keyed source. */
  get memoized(): boolean {
    return this.memoize;
  }

  /** Memoized, every report of a value is the same report, its buckets the device's: a pseudonym. */
  get deterministicPseudonym(): boolean {
    return this.memoize;
  }

  /**
   * eps for d >= 2, eps/2 for d = 1, exact for the implemented p and q (Ding, Kulkarni &
   * Yekhanin, NeurIPS 2017; Python: `DBitFlip.privacy_epsilon`, the same float).
   */
  get privacyEpsilon(): number {
    const [p, q] = this.thresholds.map(thresholdProbability) as [Rational, Rational];
    const perBit = logInt(p.num * q.den) - logInt(q.num * p.den);
    return perBit * Math.min(this.d, 2);
  }

  /** Unlimited reports of one memoized pattern reveal one report's epsilon. */
  get epsilonInf(): number {
    return this.privacyEpsilon;
  }

  /** The d buckets of this device in this campaign (sorted), from the keyed source. */
  deviceBuckets(keys: KeyedSource): number[] {
    return sampleSubsets(keys.source(DBITFLIP_BUCKETS, 0), 1, this.k, this.d)[0]!;
  }

  /** The ledger's key of each value: its pattern (the value if one of the device's buckets, else k). */
  memoKeys(values: readonly number[], keys: KeyedSource): string[] {
    const x = categoryValues(values, this.k);
    const source = requireKeys(keys, this.name);
    const buckets = this.deviceBuckets(source);
    return x.map((v) => source.key(DBITFLIP_BITS, buckets.includes(v) ? v : this.k));
  }

  #bits(words: BigUint64Array, buckets: readonly number[], v: number): boolean[] {
    const [high, low] = this.thresholds;
    return buckets.map((bucket, i) => words[i]! < (bucket === v ? high : low));
  }

  perturb(values: readonly number[], options?: PerturbOptions): BucketReport[] {
    const x = categoryValues(values, this.k);
    if (this.memoize) {
      const keys = requireKeys(options?.keys, this.name);
      const buckets = this.deviceBuckets(keys);
      return x.map((v) => {
        const pattern = buckets.includes(v) ? v : this.k;
        const words = keys.source(DBITFLIP_BITS, pattern).words(this.d);
        return { buckets: [...buckets], bits: this.#bits(words, buckets, v) };
      });
    }
    refuseKeys(options, `${this.name} with memoize=false`);
    const rng = wordSource(options);
    const buckets = sampleSubsets(rng, x.length, this.k, this.d);
    const words = rng.words(x.length * this.d);
    return x.map((v, r) => ({
      buckets: buckets[r]!,
      bits: this.#bits(words.subarray(r * this.d, (r + 1) * this.d), buckets[r]!, v),
    }));
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): { buckets: number[]; bits: string } {
    return { buckets: new Array<number>(this.d).fill(widestInt(0, this.k)), bits: bitsText(this.d) };
  }

  toWire(reports: readonly BucketReport[]): { buckets: number[]; bits: string }[] {
    return reports.map(({ buckets, bits }) => ({ buckets: [...buckets], bits: encodeBitRow(bits) }));
  }
}

// ---- rappor ------------------------------------------------------------------------------------

const HMAC_SHA256_MAX_K = 32;

/** HMAC_DRBG-SHA256 seeded with key || data, as the reference encoder's `HmacDrbg`. */
export function hmacDrbg(key: Uint8Array, data: Uint8Array, nbytes: number): Uint8Array {
  const provided = new Uint8Array([...key, ...data]);
  let k: Uint8Array = new Uint8Array(32);
  let v: Uint8Array = new Uint8Array(32).fill(1);
  k = hmac(sha256, k, new Uint8Array([...v, 0, ...provided]));
  v = hmac(sha256, k, v);
  k = hmac(sha256, k, new Uint8Array([...v, 1, ...provided]));
  v = hmac(sha256, k, v);
  const out = new Uint8Array(Math.ceil(nbytes / 32) * 32);
  for (let at = 0; at < nbytes; at += 32) {
    v = hmac(sha256, k, v);
    out.set(v, at);
  }
  return out.subarray(0, nbytes);
}

export interface RapporReport {
  cohort: number;
  /** bit i of the report (i = 0 … k-1). */
  bits: boolean[];
}

/** RAPPOR (Erlingsson, Pihur & Korolova, CCS 2014), the reference encoder's derivation. */
export class Rappor implements Mechanism<string, RapporReport> {
  readonly name = "rappor";
  readonly valueKind = "string";
  /** Every report of a string derives from its permanent response (Python: `RAPPOR.memoized`). */
  readonly memoized = true;
  readonly fTimes128: number;
  readonly irrThresholds: readonly [bigint, bigint];

  constructor(
    readonly k: number,
    readonly h: number,
    readonly m: number,
    readonly f: number,
    readonly p: number,
    readonly q: number,
  ) {
    if (k > HMAC_SHA256_MAX_K && k % 8 !== 0) throw new RangeError(`k must be a multiple of 8 when above 32; got ${k}`);
    this.fTimes128 = Number(Rational.fromDouble(f).mul(128n).add(new Rational(1n, 2n)).floor());
    if (this.fTimes128 < 1 || this.fTimes128 > 127) throw new RangeError("f must round to a multiple of 1/128 in [1/128, 127/128]");
    if (!(p >= 0 && p <= 1 && q >= 0 && q <= 1 && p < q)) throw new RangeError("p and q must be probabilities with p < q");
    this.irrThresholds = [probabilityThreshold(p, "up"), probabilityThreshold(q, "down")];
  }

  /** (P[PRR bit 1 | Bloom bit 0], P[PRR bit 1 | Bloom bit 1]) = (f/2, 1 - f/2), the implemented f. */
  get prrProbabilities(): [Rational, Rational] {
    const half = new Rational(BigInt(this.fTimes128), 256n);
    return [half, new Rational(1n).sub(half)];
  }

  /**
   * epsilon_1 = h ln[q**(1-p**) / (p**(1-q**))], the privacy of one report, with p** and q** of
   * the implemented f, p and q (Erlingsson, Pihur & Korolova, CCS 2014, section 6; Python:
   * `Rappor.epsilon_one`, the same float).
   */
  get privacyEpsilon(): number {
    const [zero, one] = this.prrProbabilities;
    const p = thresholdProbability(this.irrThresholds[0]);
    const q = thresholdProbability(this.irrThresholds[1]);
    const p2 = zero.mul(q).add(new Rational(1n).sub(zero).mul(p));
    const q2 = one.mul(q).add(new Rational(1n).sub(one).mul(p));
    const ratio = q2.mul(new Rational(1n).sub(p2)).div(p2.mul(new Rational(1n).sub(q2)));
    return this.h * Math.log(ratio.toNumber());
  }

  /** epsilon_inf = 2h ln[(1-f/2)/(f/2)]: any number of reports of one value (the PRR). */
  get epsilonInf(): number {
    const [zero, one] = this.prrProbabilities;
    return 2 * this.h * Math.log(one.div(zero).toNumber());
  }

  /** The ledger's key of each value: one permanent response per distinct string (`"rappor:<value>"`). */
  memoKeys(values: readonly string[], keys: KeyedSource): string[] {
    const source = requireKeys(keys, this.name);
    return stringValues(values).map((value) => source.key(`rappor:${value}`, 0));
  }

  /** The Bloom filter of `value` in `cohort` as bits (bit i = index i). */
  bloom(value: Uint8Array, cohort: number): boolean[] {
    const prefix = new Uint8Array(4);
    new DataView(prefix.buffer).setUint32(0, cohort, false);
    const digest = md5(new Uint8Array([...prefix, ...value]));
    const bits = new Array<boolean>(this.k).fill(false);
    for (let i = 0; i < this.h; i++) bits[digest[i]! % this.k] = true;
    return bits;
  }

  /** The permanent randomized response of one value (never leaves the device). */
  permanentResponse(value: Uint8Array, cohort: number, secret: Uint8Array, encoderId: Uint8Array): boolean[] {
    const bloom = this.bloom(value, cohort);
    const width = this.k <= HMAC_SHA256_MAX_K ? 4 : this.k / 8;
    const number = new Uint8Array(width); // B as a big-endian integer, bit i = 2^i
    bloom.forEach((bit, i) => {
      if (bit) number[width - 1 - (i >> 3)]! |= 1 << (i & 7);
    });
    const message = new Uint8Array([1, ...encoderId, ...number]);
    const stream =
      this.k <= HMAC_SHA256_MAX_K ? hmac(sha256, secret, message) : hmacDrbg(secret, message, Math.max(this.k, 32));
    return bloom.map((bit, i) => {
      const byte = stream[i]!;
      return byte >> 1 < this.fTimes128 ? (byte & 1) === 1 : bit;
    });
  }

  /** The device's cohort in the campaign: `uniformBelow(m)` from `keys.source("rappor-cohort", 0)`. */
  cohort(keys: KeyedSource): number {
    return this.m === 1 ? 0 : Number(uniformBelow(keys.source("rappor-cohort", 0), this.m, 1)[0]!);
  }

  perturb(values: readonly string[], options?: PerturbOptions): RapporReport[] {
    const strings = stringValues(values);
    const keys = requireKeys(options?.keys, this.name);
    const rng = wordSource(options);
    const cohort = this.cohort(keys);
    const secret = keys.referenceSecret;
    const encoderId = new TextEncoder().encode(keys.scope);
    const prrs = strings.map((s) => this.permanentResponse(utf8Surrogates(s), cohort, secret, encoderId));
    const [tp, tq] = this.irrThresholds;
    const out: RapporReport[] = [];
    for (const [start, stop] of chunks(prrs.length, rowsPerChunk(this.k))) {
      const pBits = bernoulliLazy(rng, tp, (stop - start) * this.k);
      const qBits = bernoulliLazy(rng, tq, (stop - start) * this.k);
      for (let r = start; r < stop; r++) {
        const base = (r - start) * this.k;
        out.push({ cohort, bits: prrs[r]!.map((prr, i) => (prr ? qBits[base + i]! : pBits[base + i]!)) });
      }
    }
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`): k characters of bits. */
  largestWirePayload(): { cohort: number; bits: string } {
    return { cohort: widestInt(0, this.m), bits: "0".repeat(this.k) };
  }

  toWire(reports: readonly RapporReport[]): { cohort: number; bits: string }[] {
    return reports.map(({ cohort, bits }) => ({
      cohort,
      bits: [...bits]
        .reverse()
        .map((b) => (b ? "1" : "0"))
        .join(""),
    }));
  }
}

/** UTF-8 with a lone surrogate written as its 3 bytes (Python: `encode("utf-8", "surrogatepass")`). */
export function utf8Surrogates(value: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < value.length; i++) {
    let c = value.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
      }
    }
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

// ---- factories ----------------------------------------------------------------------------------

type Oracle = GRR | UnaryEncoding | SubsetSelection | LocalHashing | HadamardResponse;

/**
 * A categorical oracle's factory, with its `"longitudinal"` (memoized) variant: `build` makes the
 * oracle at an epsilon from the config's `k` and `fields`, `chain` its memoization chain at the
 * one-report target e^eps (Python: `memoization_chain`). One factory per oracle, so that a
 * browser chunk of some oracles carries none of the others' code (src/mechanisms/groups/).
 */
function oracleFactory<O extends Oracle>(
  name: string,
  fields: readonly string[],
  build: (config: Readonly<Record<string, unknown>>, epsilon: number, k: number) => O,
  chain: (inner: O, target: Rational) => BatchChain<unknown>,
): MechanismFactory {
  return (config: MechanismConfig): Mechanism => {
    checkKeys(config, name, ["epsilon", "k", ...fields], ["longitudinal"]);
    const epsilon = configEpsilon(config);
    const permanent = configPermanent(config, epsilon, ["allow_pseudonym"]);
    if (permanent === undefined) return build(config, epsilon, configInt(config, "k", 2, MAX_K)) as Mechanism;
    configBool(configObject(config, "longitudinal"), "allow_pseudonym", false);
    const inner = build(config, permanent, configInt(config, "k", 2, MAX_K));
    return longitudinal(inner as Mechanism<number, unknown>, chain(inner, expRational(epsilon)), (values) => categoryValues(values, inner.k), {
      report: epsilon,
      permanent,
    }) as Mechanism;
  };
}

/** L-GRR: keep the permanent category or draw another (Python: `RandomizedResponseChain`). */
function grrChain(inner: GRR, target: Rational): BatchChain<unknown> {
  const threshold = randomizedResponseChainThreshold(thresholdProbability(inner.keepThreshold), inner.k, target);
  return {
    kind: "l-grr",
    threshold,
    instantaneous: (permanent, rng) => keepOrOther(rng, permanent as number[], threshold, inner.k),
  };
}

/** L-LH: the same on the hashed value, keeping each report's seed. */
function localHashingChain(inner: LocalHashing, target: Rational): BatchChain<unknown> {
  const threshold = randomizedResponseChainThreshold(thresholdProbability(inner.keepThreshold), inner.g, target);
  return {
    kind: "l-lh",
    threshold,
    instantaneous: (permanent, rng) => {
      const reports = permanent as HashedReport[];
      const y = keepOrOther(
        rng,
        reports.map((r) => r.y),
        threshold,
        inner.g,
      );
      return reports.map((r, i) => ({ seed: r.seed, y: y[i]! }));
    },
  };
}

/** The mixture chain of ss and hr, from the oracle's column profile. */
function columnChain(inner: SubsetSelection | HadamardResponse, target: Rational): BatchChain<unknown> {
  return mixtureChain(inner as Mechanism<number, unknown>, inner.k, inner.columnProfile(), target);
}

const unaryChain = (inner: UnaryEncoding, target: Rational): BatchChain<unknown> => bitFlipChain(inner, target) as BatchChain<unknown>;

export const grrFactory = /* @__PURE__ */ oracleFactory("grr", [], (_, epsilon, k) => new GRR(epsilon, k), grrChain);
export const sueFactory = /* @__PURE__ */ oracleFactory("sue", [], (_, epsilon, k) => new UnaryEncoding("sue", epsilon, k), unaryChain);
export const oueFactory = /* @__PURE__ */ oracleFactory("oue", [], (_, epsilon, k) => new UnaryEncoding("oue", epsilon, k), unaryChain);
export const ssFactory = /* @__PURE__ */ oracleFactory("ss", ["d"], (config, epsilon, k) => new SubsetSelection(epsilon, k, configInt(config, "d", 1, k - 1)), columnChain);
export const olhFactory = /* @__PURE__ */ oracleFactory(
  "olh",
  ["g"],
  (config, epsilon, k) => new LocalHashing("olh", epsilon, k, configInt(config, "g", 2, HASH_PRIME)),
  localHashingChain,
);
export const blhFactory = /* @__PURE__ */ oracleFactory("blh", [], (_, epsilon, k) => new LocalHashing("blh", epsilon, k, 2), localHashingChain);
export const hrFactory = /* @__PURE__ */ oracleFactory(
  "hr",
  ["blocks"],
  (config, epsilon, k) => new HadamardResponse(epsilon, k, configInt(config, "blocks", 1, k)),
  columnChain,
);

/** dbitflip and rappor: a group of their own (loader.ts), so a page of the oracles loads neither. */
export const RAPPOR_DBITFLIP_FACTORIES: Readonly<Record<string, MechanismFactory>> = {
  dbitflip: (config) => {
    checkKeys(config, "dbitflip", ["epsilon", "k", "d"], ["memoize"]);
    const k = configInt(config, "k", 2, 2 ** 20);
    return new DBitFlip(configEpsilon(config), k, configInt(config, "d", 1, k), configBool(config, "memoize", true)) as Mechanism;
  },
  rappor: (config) => {
    checkKeys(config, "rappor", ["k", "h", "m", "f", "p", "q"]);
    const k = configInt(config, "k", 1, 256);
    return new Rappor(
      k,
      configInt(config, "h", 1, Math.min(k, 16)),
      configInt(config, "m", 1, 2 ** 16),
      configNumber(config, "f"),
      configNumber(config, "p"),
      configNumber(config, "q"),
    ) as Mechanism;
  },
};
