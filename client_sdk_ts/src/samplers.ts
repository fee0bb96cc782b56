/**
 * The exact samplers every mechanism draws with (docs/protocol.md, "Random words"; Python:
 * `client_sdk.randomness` and `client_sdk.mechanisms.grid.randomized_round`). Each takes the
 * word source first and consumes words exactly as the Python SDK does, so that the same words
 * give the same draws.
 */
import { MAX_WORD, WORD_SPAN, bitLength } from "./rational.js";
import type { WordSource } from "./words.js";

const BYTE_MASK = 0xffn;
const LOW_56 = (1n << 56n) - 1n;

function checkCount(count: number, name = "size"): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`${name} must be a non-negative integer; got ${typeof count}`);
  }
}

function checkThreshold(threshold: bigint): void {
  if (typeof threshold !== "bigint" || threshold < 0n || threshold > MAX_WORD) {
    throw new RangeError(`threshold must be a bigint in [0, 2**64); got ${typeof threshold}`);
  }
}

/** The little-endian bytes of `words`, the first `count` of them. */
export function wordBytes(words: BigUint64Array, count: number): Uint8Array {
  const bytes = new Uint8Array(words.length * 8);
  const view = new DataView(bytes.buffer);
  words.forEach((word, i) => view.setBigUint64(8 * i, word, true));
  return bytes.subarray(0, count);
}

/** Independent Bernoulli(T / 2^64) draws: one word each, `word < T`. */
export function bernoulli(source: WordSource, threshold: bigint, size: number): boolean[] {
  checkThreshold(threshold);
  checkCount(size);
  return Array.from(source.words(size), (word) => word < threshold);
}

/**
 * Bernoulli(T / 2^64) from one byte each: byte j < T >> 56 decides; a tie (byte == T >> 56,
 * when the low 56 bits of T are not zero) takes one more word w, in order, and is (w >> 8) < low.
 */
export function bernoulliLazy(source: WordSource, threshold: bigint, size: number): boolean[] {
  checkThreshold(threshold);
  checkCount(size);
  const high = Number(threshold >> 56n);
  const low = threshold & LOW_56;
  const bytes = wordBytes(source.words(Math.ceil(size / 8)), size);
  const out = new Array<boolean>(size);
  const ties: number[] = [];
  for (let j = 0; j < size; j++) {
    out[j] = bytes[j]! < high;
    if (bytes[j] === high) ties.push(j);
  }
  if (low !== 0n && ties.length > 0) {
    const words = source.words(ties.length);
    ties.forEach((j, i) => {
      out[j] = words[i]! >> 8n < low;
    });
  }
  return out;
}

function toHigh(value: bigint | number, name: string): bigint {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new RangeError(`${name} must be an integer; got ${typeof value}`);
    return BigInt(value);
  }
  if (typeof value !== "bigint") throw new TypeError(`${name} must be an integer; got ${typeof value}`);
  return value;
}

/**
 * Exactly uniform integers in [0, high) for 1 <= high < 2^63 (a scalar or one per draw): a word
 * below 2^64 - (2^64 mod high) gives word mod high; the rejected draws are drawn again together.
 */
export function uniformBelow(
  source: WordSource,
  high: bigint | number | readonly (bigint | number)[],
  size: number,
): bigint[] {
  checkCount(size);
  const highs: bigint[] = Array.isArray(high)
    ? (high as readonly (bigint | number)[]).map((h) => toHigh(h, "high"))
    : new Array<bigint>(size).fill(toHigh(high as bigint | number, "high"));
  if (highs.length !== size) throw new RangeError(`high must be a scalar or have length ${size}; got ${highs.length}`);
  for (const h of highs) {
    if (h < 1n || h >= 1n << 63n) throw new RangeError("high must be in [1, 2**63)");
  }
  const out = new Array<bigint>(size).fill(0n);
  let pending = highs.map((_, i) => i);
  while (pending.length > 0) {
    const words = source.words(pending.length);
    const rejected: number[] = [];
    pending.forEach((index, i) => {
      const h = highs[index]!;
      const word = words[i]!;
      if (word < WORD_SPAN - (WORD_SPAN % h)) out[index] = word % h;
      else rejected.push(index);
    });
    pending = rejected;
  }
  return out;
}

/**
 * Exactly uniform integers in [0, high) for 1 <= high <= 2^32 (a scalar or one per draw) by
 * Lemire's multiply-shift (ACM TOMACS 2019) on L-bit little-endian lanes of the words, L = 16
 * when every high is at most 2^12, else 32; the rejected draws are drawn again by the same
 * function over their own highs.
 */
export function uniformBelow32(source: WordSource, high: number | readonly number[], size: number): number[] {
  checkCount(size);
  const highs: number[] = typeof high === "number" ? new Array<number>(size).fill(high) : [...high];
  if (highs.length !== size) throw new RangeError(`high must be a scalar or have length ${size}; got ${highs.length}`);
  let largest = 0;
  for (const h of highs) {
    if (!Number.isSafeInteger(h) || h < 1 || h > 2 ** 32) throw new RangeError(`high must be integers in [1, 2**32]; got ${typeof h}`);
    if (h > largest) largest = h;
  }
  const out = new Array<number>(size).fill(0);
  if (size === 0) return out;
  const laneBits = largest <= 1 << 12 ? 16 : 32;
  const perWord = 64 / laneBits;
  const words = source.words(Math.ceil(size / perWord));
  const rejected: number[] = [];
  for (let i = 0; i < size; i++) {
    const word = words[Math.floor(i / perWord)]!;
    const h = highs[i]!;
    if (laneBits === 16) {
      const lane = Number((word >> BigInt(16 * (i % 4))) & 0xffffn);
      const product = lane * h; // below 2^28
      out[i] = Math.floor(product / 65536);
      if (product % 65536 < 65536 % h) rejected.push(i);
    } else {
      const lane = (word >> BigInt(32 * (i % 2))) & 0xffffffffn;
      const product = lane * BigInt(h);
      out[i] = Number(product >> 32n);
      if ((product & 0xffffffffn) < (1n << 32n) % BigInt(h)) rejected.push(i);
    }
  }
  if (rejected.length > 0) {
    const redo = uniformBelow32(
      source,
      rejected.map((i) => highs[i]!),
      rejected.length,
    );
    rejected.forEach((i, j) => {
      out[i] = redo[j]!;
    });
  }
  return out;
}

/**
 * Exactly uniform integers in [0, high) for 2 <= high <= 2^32: the top bitlen(high - 1) bits of
 * 32-bit little-endian lanes, the draws at or above high drawn again together.
 */
export function uniformBelowBits(source: WordSource, high: number, size: number): number[] {
  checkCount(size);
  if (!Number.isSafeInteger(high) || high < 2 || high > 2 ** 32) {
    throw new RangeError(`high must be in [2, 2**32]; got ${typeof high}`);
  }
  const shift = BigInt(32 - bitLength(BigInt(high - 1)));
  const out = new Array<number>(size).fill(0);
  let pending = out.map((_, i) => i);
  while (pending.length > 0) {
    const words = source.words(Math.ceil(pending.length / 2));
    const rejected: number[] = [];
    pending.forEach((index, i) => {
      const lane = (words[i >> 1]! >> BigInt(32 * (i & 1))) & 0xffffffffn;
      const value = Number(lane >> shift);
      out[index] = value;
      if (value >= high) rejected.push(index);
    });
    pending = rejected;
  }
  return out;
}

/** `size` fair coin flips: ⌈size/64⌉ words, their little-endian bytes unpacked MSB first. */
export function randomBits(source: WordSource, size: number): boolean[] {
  checkCount(size);
  const bytes = wordBytes(source.words(Math.ceil(size / 64)), Math.ceil(size / 64) * 8);
  const out = new Array<boolean>(size);
  for (let i = 0; i < size; i++) out[i] = ((bytes[i >> 3]! >> (7 - (i & 7))) & 1) === 1;
  return out;
}

/**
 * n independent uniform k-subsets of [0, d), each sorted (Floyd's algorithm, Bentley & Floyd,
 * CACM 1987, vectorized over the rows as Python's: one `uniformBelow(j + 1, n)` per step j).
 */
export function sampleSubsets(source: WordSource, n: number, d: number, k: number): number[][] {
  checkCount(n, "n");
  if (!Number.isSafeInteger(d) || !Number.isSafeInteger(k) || k < 0 || k > d) {
    throw new RangeError(`sample_subsets needs integers 0 <= k <= d; got ${typeof k} and ${typeof d}`);
  }
  if (k === d) return Array.from({ length: n }, () => Array.from({ length: d }, (_, i) => i));
  const chosen: number[][] = Array.from({ length: n }, () => []);
  for (let j = d - k; j < d; j++) {
    const draws = uniformBelow(source, j + 1, n);
    chosen.forEach((row, i) => {
      const r = Number(draws[i]!);
      row.push(row.includes(r) ? j : r);
    });
  }
  return chosen.map((row) => row.sort((a, b) => a - b));
}

const TWO_64 = 2 ** 64;
const BELOW_TWO_64 = TWO_64 - 2048; // math.nextafter(2.0**64, 0)

/**
 * Round each u to ⌊u⌋ + 1 with probability u - ⌊u⌋, all in float64 as Python's
 * `randomized_round`: u clipped to [0, top] (when top is given), base = min(⌊u⌋, top - 1),
 * phi = u - base, one word each, up when word < min(⌊phi·2^64⌋, 2^64 - 2048) or phi >= 1.
 */
export function randomizedRound(source: WordSource, values: readonly number[], top?: number): number[] {
  const split = values.map((raw) => {
    let u = raw;
    if (top !== undefined) u = Math.min(Math.max(u, 0), top);
    let base = Math.floor(u);
    if (top !== undefined && top >= 1) base = Math.min(base, top - 1);
    return { base, phi: u - base };
  });
  const words = source.words(values.length);
  return split.map(({ base, phi }, i) => {
    const threshold = BigInt(Math.min(Math.floor(phi * TWO_64), BELOW_TWO_64));
    return base + (words[i]! < threshold || phi >= 1 ? 1 : 0);
  });
}

// ---- bernoulli_bytes ----------------------------------------------------------------------

const HEADS_DECIDING = 192;

interface ByteTable {
  /** C[0] = 0, C[b+1] = C[b] + T^w (2^64 - T)^(8-w), w = popcount(b); C[256] = 2^512. */
  cumulative: bigint[];
  /** How many of the 256 8-bit prefixes decide their byte alone. */
  headsDeciding: number;
}

const byteTables = new Map<bigint, ByteTable>();

function popcount8(b: number): number {
  let count = 0;
  for (let v = b; v !== 0; v &= v - 1) count++;
  return count;
}

function byteTable(threshold: bigint): ByteTable {
  const cached = byteTables.get(threshold);
  if (cached !== undefined) return cached;
  const one = threshold;
  const zero = WORD_SPAN - threshold;
  const cumulative = [0n];
  for (let b = 0; b < 256; b++) {
    const w = BigInt(popcount8(b));
    cumulative.push(cumulative[b]! + one ** w * zero ** (8n - w));
  }
  const table: ByteTable = { cumulative, headsDeciding: 0 };
  for (let head = 0; head < 256; head++) if (decide(table, BigInt(head), 8) >= 0) table.headsDeciding++;
  if (byteTables.size > 64) byteTables.clear();
  byteTables.set(threshold, table);
  return table;
}

/** The byte whose cell holds [P, P + 1) / 2^bits, or -1 when a cell boundary falls inside. */
function decide(table: ByteTable, prefix: bigint, bits: number): number {
  const c = table.cumulative;
  const scale = 512 - bits;
  const begin = scale >= 0 ? prefix << BigInt(scale) : prefix >> BigInt(-scale);
  // the last cell start <= begin (bisect_right - 1)
  let lo = 0;
  let hi = 256;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (c[mid]! <= begin) lo = mid;
    else hi = mid - 1;
  }
  if (scale < 0) return lo; // beyond 512 bits every interval lies in one cell
  return (prefix + 1n) << BigInt(scale) <= c[lo + 1]! ? lo : -1;
}

/** Lanes that 16 bits did not decide: one word each (together), then more words one at a time. */
function refine(source: WordSource, table: ByteTable, lanes: readonly bigint[]): number[] {
  const words = source.words(lanes.length);
  return lanes.map((lane, i) => {
    let prefix = (lane << 64n) | words[i]!;
    let bits = 80;
    for (;;) {
      const cell = decide(table, prefix, bits);
      if (cell >= 0) return cell;
      prefix = (prefix << 64n) | source.words(1)[0]!;
      bits += 64;
    }
  });
}

/**
 * Bytes of 8 independent Bernoulli(T / 2^64) bits each (the first bit the most significant), as
 * the cell of a lazily drawn uniform number in the exact cumulative distribution of the 256 byte
 * values (Knuth & Yao 1976; Han & Hoshi, IEEE Trans. IT 1997), drawing words as Python's
 * `bernoulli_bytes`: 8-bit heads first when at least 192 of them decide, else 16-bit lanes.
 */
export function bernoulliBytes(source: WordSource, threshold: bigint, size: number): Uint8Array {
  checkThreshold(threshold);
  checkCount(size);
  const table = byteTable(threshold);
  const out = new Uint8Array(size);
  const settle = (indexes: readonly number[], lanes: readonly bigint[]): void => {
    const straddling: number[] = [];
    indexes.forEach((index, i) => {
      const cell = decide(table, lanes[i]!, 16);
      if (cell >= 0) out[index] = cell;
      else straddling.push(i);
    });
    if (straddling.length > 0) {
      const refined = refine(
        source,
        table,
        straddling.map((i) => lanes[i]!),
      );
      straddling.forEach((i, j) => {
        out[indexes[i]!] = refined[j]!;
      });
    }
  };
  if (table.headsDeciding < HEADS_DECIDING) {
    const words = source.words(Math.ceil(size / 4));
    const lanes = Array.from({ length: size }, (_, i) => (words[i >> 2]! >> BigInt(16 * (i & 3))) & 0xffffn);
    settle(
      lanes.map((_, i) => i),
      lanes,
    );
    return out;
  }
  const heads = wordBytes(source.words(Math.ceil(size / 8)), size);
  const later: number[] = [];
  heads.forEach((head, i) => {
    const cell = decide(table, BigInt(head), 8);
    if (cell >= 0) out[i] = cell;
    else later.push(i);
  });
  if (later.length > 0) {
    const tails = wordBytes(source.words(Math.ceil(later.length / 8)), later.length);
    settle(
      later,
      later.map((index, j) => (BigInt(heads[index]!) << 8n) | (BigInt(tails[j]!) & BYTE_MASK)),
    );
  }
  return out;
}
