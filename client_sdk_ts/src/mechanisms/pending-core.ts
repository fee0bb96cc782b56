/**
 * INTERIM: the samplers, exact thresholds, bit rows and keyed source the string mechanisms need,
 * written from docs/protocol.md ("Random words", "Bit rows", "Memoization") until the core group's
 * src/samplers.ts, src/rational.ts, src/wire.ts and src/memoization.ts land; then this file goes.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { HmacWordSource, type WordSource } from "../words.js";
import { exp } from "./correctly-rounded.js";

export const WORD_SPAN = 1n << 64n;
/** The largest keep threshold of an instantaneous step. */
export const MAX_THRESHOLD = WORD_SPAN - 1n;
const MASK32 = 0xffffffffn;

// ---- exact rationals (Python's Fraction, as the thresholds use it) ------------------------------

/** An exact rational num/den (den > 0), not reduced: compared by cross-multiplication. */
export class Fraction {
  constructor(
    readonly num: bigint,
    readonly den: bigint = 1n,
  ) {
    if (den <= 0n) throw new RangeError("Fraction: the denominator must be positive");
  }
  static of(value: bigint | number | Fraction): Fraction {
    if (value instanceof Fraction) return value;
    if (typeof value === "bigint") return new Fraction(value);
    return Fraction.fromDouble(value);
  }
  /** The exact value of a finite double (Python: ``Fraction(float)``). */
  static fromDouble(x: number): Fraction {
    if (!Number.isFinite(x)) throw new RangeError("Fraction.fromDouble: not a finite number");
    if (Number.isInteger(x)) return new Fraction(BigInt(x));
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    const bits = view.getBigUint64(0);
    const sign = bits >> 63n ? -1n : 1n;
    const exponent = Number((bits >> 52n) & 0x7ffn);
    let mantissa = bits & ((1n << 52n) - 1n);
    let shift: number;
    if (exponent === 0) shift = -1074;
    else {
      mantissa |= 1n << 52n;
      shift = exponent - 1075;
    }
    return shift >= 0
      ? new Fraction(sign * (mantissa << BigInt(shift)))
      : new Fraction(sign * mantissa, 1n << BigInt(-shift));
  }
  add(o: Fraction | bigint | number): Fraction {
    const b = Fraction.of(o);
    return new Fraction(this.num * b.den + b.num * this.den, this.den * b.den);
  }
  sub(o: Fraction | bigint | number): Fraction {
    const b = Fraction.of(o);
    return new Fraction(this.num * b.den - b.num * this.den, this.den * b.den);
  }
  mul(o: Fraction | bigint | number): Fraction {
    const b = Fraction.of(o);
    return new Fraction(this.num * b.num, this.den * b.den);
  }
  div(o: Fraction | bigint | number): Fraction {
    const b = Fraction.of(o);
    if (b.num === 0n) throw new RangeError("Fraction: division by zero");
    return b.num < 0n
      ? new Fraction(-this.num * b.den, this.den * -b.num)
      : new Fraction(this.num * b.den, this.den * b.num);
  }
  pow(n: number): Fraction {
    let out = new Fraction(1n);
    for (let i = 0; i < n; i++) out = out.mul(this);
    return out;
  }
  cmp(o: Fraction | bigint | number): number {
    const b = Fraction.of(o);
    const left = this.num * b.den;
    const right = b.num * this.den;
    return left < right ? -1 : left > right ? 1 : 0;
  }
}

/** The double just below x towards 0 (Python's ``math.nextafter(x, 0.0)``, x > 0). */
export function nextBelow(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** A double at most e^x (Python's ``grid.exp_below``). */
export function expBelow(x: number): number {
  return nextBelow(exp(x));
}

/** T = p·2^64 rounded as asked, clamped to [0, 2^64 - 1] (Python's ``probability_threshold``). */
export function probabilityThreshold(p: Fraction, rounding: "down" | "up" | "nearest"): bigint {
  if (p.cmp(0n) < 0 || p.cmp(1n) > 0) throw new RangeError("probability must be in [0, 1]");
  const scaled = p.num * WORD_SPAN;
  const floor = scaled / p.den; // p >= 0: truncation is the floor
  const rest = scaled - floor * p.den;
  let threshold = floor;
  if (rounding === "up") threshold = rest === 0n ? floor : floor + 1n;
  else if (rounding === "nearest") {
    const twice = 2n * rest;
    if (twice > p.den || (twice === p.den && floor % 2n === 1n)) threshold = floor + 1n;
  }
  return threshold > WORD_SPAN - 1n ? WORD_SPAN - 1n : threshold;
}

/** T / 2^64 exactly. */
export function thresholdProbability(threshold: bigint): Fraction {
  return new Fraction(threshold, WORD_SPAN);
}

/** The largest T in [low, high] with ratio(T) <= target, ratio non-decreasing (Python's
 * ``memoization.largest_threshold``). */
export function largestThreshold(
  ratio: (threshold: bigint) => Fraction,
  low: bigint,
  high: bigint,
  target: Fraction,
): bigint {
  if (ratio(low).cmp(target) > 0) throw new RangeError("no instantaneous randomization reaches the target epsilon");
  if (ratio(high).cmp(target) <= 0) return high;
  while (high - low > 1n) {
    const middle = (low + high) / 2n;
    if (ratio(middle).cmp(target) <= 0) low = middle;
    else high = middle;
  }
  return low;
}

// ---- samplers (docs/protocol.md, "Random words") --------------------------------------------------

function wordBytes(words: BigUint64Array): Uint8Array {
  const out = new Uint8Array(words.length * 8);
  const view = new DataView(out.buffer);
  words.forEach((w, i) => view.setBigUint64(8 * i, w, true));
  return out;
}

function word(rng: WordSource): bigint {
  const w = rng.words(1)[0];
  if (w === undefined) throw new Error("word source gave no word");
  return w;
}

/** uniform_below with one high per draw (each 1 <= high < 2^63): rejected draws redrawn together. */
export function uniformBelowEach(rng: WordSource, highs: readonly bigint[]): bigint[] {
  const out: bigint[] = highs.map(() => 0n);
  let pending = highs.map((_, i) => i);
  while (pending.length > 0) {
    const drawn = rng.words(pending.length);
    const again: number[] = [];
    pending.forEach((index, j) => {
      const high = highs[index] as bigint;
      const w = drawn[j] as bigint;
      if (w < WORD_SPAN - (WORD_SPAN % high)) out[index] = w % high;
      else again.push(index);
    });
    pending = again;
  }
  return out;
}

/** uniform_below(high, n). */
export function uniformBelow(rng: WordSource, high: number, n: number): number[] {
  return uniformBelowEach(rng, new Array<bigint>(n).fill(BigInt(high))).map(Number);
}

/** uniform_below_32 over per-draw highs (1 <= high <= 2^32): 16- or 32-bit lanes, multiply-shift. */
export function uniformBelow32Each(rng: WordSource, highs: readonly number[]): number[] {
  if (highs.length === 0) return [];
  const lane = highs.every((h) => h <= 1 << 12) ? 16 : 32;
  const perWord = 64 / lane;
  const words = rng.words(Math.ceil(highs.length / perWord));
  const bits = BigInt(lane);
  const span = 1n << bits;
  const out: number[] = [];
  const rejected: number[] = [];
  highs.forEach((high, i) => {
    const w = words[Math.floor(i / perWord)] as bigint;
    const u = (w >> (bits * BigInt(i % perWord))) & (span - 1n);
    const product = u * BigInt(high);
    out.push(Number(product >> bits));
    if (product % span < span % BigInt(high)) rejected.push(i);
  });
  if (rejected.length > 0) {
    const again = uniformBelow32Each(
      rng,
      rejected.map((i) => highs[i] as number),
    );
    rejected.forEach((i, j) => {
      out[i] = again[j] as number;
    });
  }
  return out;
}

/** uniform_below_32(high, n). */
export function uniformBelow32(rng: WordSource, high: number, n: number): number[] {
  return uniformBelow32Each(rng, new Array<number>(n).fill(high));
}

/** uniform_below_bits(high, n), 2 <= high <= 2^32: top bits of 32-bit lanes, rejected redrawn. */
export function uniformBelowBits(rng: WordSource, high: number, n: number): number[] {
  const shift = 32n - BigInt((high - 1).toString(2).length);
  const out = new Array<number>(n).fill(0);
  let pending = out.map((_, i) => i);
  while (pending.length > 0) {
    const words = rng.words(Math.ceil(pending.length / 2));
    const again: number[] = [];
    pending.forEach((index, j) => {
      const w = words[j >> 1] as bigint;
      const lane = Number(((w >> (32n * BigInt(j & 1))) & MASK32) >> shift);
      if (lane < high) out[index] = lane;
      else again.push(index);
    });
    pending = again;
  }
  return out;
}

/** bernoulli(T, n): one word per draw, `word < T`. */
export function bernoulli(rng: WordSource, threshold: bigint, n: number): boolean[] {
  return Array.from(rng.words(n), (w) => w < threshold);
}

/** bernoulli_lazy(T, n): a byte per draw, ties refined by one more word each, in order. */
export function bernoulliLazy(rng: WordSource, threshold: bigint, n: number): boolean[] {
  const bytes = wordBytes(rng.words(Math.ceil(n / 8)));
  const high = Number(threshold >> 56n);
  const low = threshold & ((1n << 56n) - 1n);
  const out: boolean[] = [];
  for (let j = 0; j < n; j++) out.push((bytes[j] as number) < high);
  if (low !== 0n) {
    for (let j = 0; j < n; j++) {
      if (bytes[j] === high) out[j] = word(rng) >> 8n < low;
    }
  }
  return out;
}

/** random_bits(n): the words' little-endian bytes, most significant bit first. */
export function randomBits(rng: WordSource, n: number): boolean[] {
  const bytes = wordBytes(rng.words(Math.ceil(n / 64)));
  const out: boolean[] = [];
  for (let i = 0; i < n; i++) out.push((((bytes[i >> 3] as number) >> (7 - (i & 7))) & 1) === 1);
  return out;
}

// ---- bit rows (docs/protocol.md, "Bit rows") ----------------------------------------------------

/** k bits packed most significant bit first into ceil(k/8) bytes. */
export function packBits(bits: readonly boolean[]): Uint8Array {
  const out = new Uint8Array(Math.ceil(bits.length / 8));
  bits.forEach((bit, i) => {
    if (bit) out[i >> 3] = (out[i >> 3] as number) | (0x80 >> (i & 7));
  });
  return out;
}

/** Unpadded URL-safe base64. */
export function base64Url(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// ---- the keyed source (docs/protocol.md, "Memoization") -----------------------------------------

/** The device's keyed source: a word source per (label, index). */
export interface KeyedSource {
  source(label: string, index: number): WordSource;
}

function len32(text: string): Uint8Array {
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setUint32(0, bytes.length, false);
  out.set(bytes, 4);
  return out;
}

/** HmacWordSource(HMAC-SHA256(secret, len32(tag) || len32(scope) || len32(label) || index BE)). */
export class DeviceKeys implements KeyedSource {
  readonly #secret: Uint8Array;
  readonly #scope: string;
  constructor(secret: Uint8Array, scope: string) {
    this.#secret = Uint8Array.from(secret);
    this.#scope = scope;
  }
  source(label: string, index: number): WordSource {
    const index8 = new Uint8Array(8);
    new DataView(index8.buffer).setBigUint64(0, BigInt(index), false);
    const parts = [len32("ldp-telemetry/memo/v1"), len32(this.#scope), len32(label), index8];
    const message = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let offset = 0;
    for (const part of parts) {
      message.set(part, offset);
      offset += part.length;
    }
    return new HmacWordSource(hmac(sha256, this.#secret, message));
  }
}

// ---- Hadamard response (docs/protocol.md, hr; Python: client_sdk/mechanisms/hadamard.py) ---------

/** HR over [k] with B blocks at epsilon: the steps SFP's fragment needs. */
export class InterimHr {
  readonly blockSize: number;
  readonly keepThreshold: bigint;
  constructor(
    readonly epsilon: number,
    readonly k: number,
    readonly blocks: number,
  ) {
    this.blockSize = 2 ** Math.ceil(k / blocks).toString(2).length;
    const e = Fraction.fromDouble(exp(epsilon));
    this.keepThreshold = probabilityThreshold(e.div(e.add(BigInt(2 * blocks - 1))), "down");
  }

  perturb(values: readonly number[], rng: WordSource): number[] {
    const n = values.length;
    const b = this.blockSize;
    const keep = bernoulli(rng, this.keepThreshold, n);
    const other =
      this.blocks === 1 ? values.map(() => 1) : uniformBelow(rng, 2 * this.blocks - 1, n);
    const offsets = rng.words(n);
    return values.map((x, i) => {
      const block = Math.floor(x / (b - 1));
      const row = (x % (b - 1)) + 1;
      const o = other[i] as number;
      const half = keep[i] ? 2 * block : this.blocks === 1 ? o : o + (o >= 2 * block ? 1 : 0);
      let offset = Number((offsets[i] as bigint) & BigInt(b - 1));
      let v = row & offset;
      let p = 0;
      while (v) {
        p ^= 1;
        v &= v - 1;
      }
      if (p !== (half & 1)) offset ^= row & -row;
      return (half >> 1) * b + offset;
    });
  }

  /** (R, M) of the worst output column: R = alpha/beta, M = (c R + k - c)/k, c the fewest
   * symbols whose half-sets hold one output (``HadamardResponse.mixture_column_profile``). */
  mixtureColumnProfile(): [Fraction, Fraction] {
    const p = thresholdProbability(this.keepThreshold);
    const half = BigInt(this.blockSize / 2);
    const alpha = p.div(half);
    const beta = new Fraction(1n).sub(p).div(BigInt(2 * this.blocks - 1) * half);
    const high = alpha.div(beta);
    const c = BigInt(this.fewestHolders());
    const k = BigInt(this.k);
    return [high, high.mul(c).add(k - c).div(k)];
  }

  fewestHolders(): number {
    const b = this.blockSize;
    const sizes = new Set<number>();
    for (let start = 0; start < this.k; start += b - 1) sizes.add(Math.min(b - 1, this.k - start));
    let fewest = this.k;
    for (const rows of sizes) {
      const h = new Array<number>(b).fill(0);
      for (let r = 1; r <= rows; r++) h[r] = 1;
      for (let len = 1; len < b; len <<= 1) {
        for (let i = 0; i < b; i += len << 1) {
          for (let j = i; j < i + len; j++) {
            const a = h[j] as number;
            const c = h[j + len] as number;
            h[j] = a + c;
            h[j + len] = a - c;
          }
        }
      }
      for (const value of h) {
        const count = (rows + value) / 2;
        if (count >= 1 && count <= this.k - 1) fewest = Math.min(fewest, count);
      }
    }
    if (fewest >= this.k) throw new RangeError("no output of the Hadamard response separates two inputs");
    return fewest;
  }
}

/** The mixture chain's keep threshold: the largest lambda with
 * (lambda R + (1-lambda) M)/(lambda + (1-lambda) M) <= e^eps (``MixtureChain``). */
export function mixtureThreshold(profile: [Fraction, Fraction], epsilon: number): bigint {
  const [r, m] = profile;
  const one = new Fraction(1n);
  const ratio = (threshold: bigint): Fraction => {
    const lam = thresholdProbability(threshold);
    return lam.mul(r).add(one.sub(lam).mul(m)).div(lam.add(one.sub(lam).mul(m)));
  };
  return largestThreshold(ratio, 0n, MAX_THRESHOLD, Fraction.fromDouble(exp(epsilon)));
}

// ---- bernoulli_bytes and the categorical thresholds multi's compact samplers use ----------------

/** The byte whose cell holds the whole interval [prefix, prefix + 1)/2^bits, or -1. */
function intervalCell(cumulative: readonly bigint[], prefix: bigint, bits: number): number {
  const begin = prefix << BigInt(512 - bits);
  let lo = 0;
  let hi = 256; // the last cell c with cumulative[c] <= begin
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((cumulative[mid] as bigint) <= begin) lo = mid;
    else hi = mid - 1;
  }
  return (prefix + 1n) << BigInt(512 - bits) <= (cumulative[lo + 1] as bigint) ? lo : -1;
}

/** bernoulli_bytes(T, n): n bytes of 8 independent Bernoulli(T/2^64) bits, each the cell of a
 * lazily drawn uniform number (docs/protocol.md, "Random words"). */
export function bernoulliBytes(rng: WordSource, threshold: bigint, count: number): number[] {
  const one = threshold;
  const zero = WORD_SPAN - threshold;
  const cumulative: bigint[] = [0n];
  for (let b = 0; b < 256; b++) {
    let w = 0;
    for (let v = b; v; v &= v - 1) w++;
    cumulative.push((cumulative[b] as bigint) + one ** BigInt(w) * zero ** BigInt(8 - w));
  }
  let deciding = 0;
  for (let h = 0; h < 256; h++) if (intervalCell(cumulative, BigInt(h), 8) >= 0) deciding++;
  const out = new Array<number>(count).fill(-1);
  const lanes = new Array<bigint>(count).fill(0n);
  let pending: number[];
  if (deciding < 192) {
    const data = wordBytes(rng.words(Math.ceil(count / 4)));
    for (let i = 0; i < count; i++) {
      lanes[i] = BigInt((data[2 * i] as number) | ((data[2 * i + 1] as number) << 8));
      out[i] = intervalCell(cumulative, lanes[i] as bigint, 16);
    }
    pending = out.map((_, i) => i);
  } else {
    const heads = wordBytes(rng.words(Math.ceil(count / 8)));
    for (let i = 0; i < count; i++) out[i] = intervalCell(cumulative, BigInt(heads[i] as number), 8);
    pending = out.flatMap((cell, i) => (cell < 0 ? [i] : []));
    const low = wordBytes(rng.words(Math.ceil(pending.length / 8)));
    pending.forEach((i, j) => {
      lanes[i] = (BigInt(heads[i] as number) << 8n) | BigInt(low[j] as number);
      out[i] = intervalCell(cumulative, lanes[i] as bigint, 16);
    });
  }
  const straddles = pending.filter((i) => (out[i] as number) < 0);
  const refined = rng.words(straddles.length);
  straddles.forEach((i, j) => {
    let prefix = ((lanes[i] as bigint) << 64n) | (refined[j] as bigint);
    let bits = 80;
    let cell = intervalCell(cumulative, prefix, bits);
    while (cell < 0 && bits < 512) {
      prefix = (prefix << 64n) | word(rng);
      bits += 64;
      cell = intervalCell(cumulative, prefix, bits);
    }
    out[i] = cell;
  });
  return out;
}

/** GRR's keep threshold e^eps/(e^eps + k - 1), down. */
export function grrKeepThreshold(epsilon: number, k: number): bigint {
  const e = Fraction.fromDouble(exp(epsilon));
  return probabilityThreshold(e.div(e.add(BigInt(k - 1))), "down");
}

/** OUE's (p, q) thresholds: p = 1/2 down, q = 1/(e^eps + 1) up. */
export function oueThresholds(epsilon: number): [bigint, bigint] {
  const e = Fraction.fromDouble(exp(epsilon));
  return [probabilityThreshold(new Fraction(1n, 2n), "down"), probabilityThreshold(new Fraction(1n).div(e.add(1n)), "up")];
}

/** OLH's default g = max(2, round(e^eps + 1)) (Python's round: half to even). */
export function olhBuckets(epsilon: number): number {
  const optimal = exp(epsilon) + 1;
  const floor = Math.floor(optimal);
  const diff = optimal - floor;
  const rounded = diff > 0.5 || (diff === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  return Math.max(2, rounded);
}
