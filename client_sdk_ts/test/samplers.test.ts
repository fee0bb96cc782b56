import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_WORD, WORD_SPAN, probabilityThreshold } from "../src/rational.js";
import {
  bernoulli,
  bernoulliBytes,
  bernoulliLazy,
  randomBits,
  randomizedRound,
  sampleSubsets,
  uniformBelow,
  uniformBelow32,
  uniformBelowBits,
} from "../src/samplers.js";
import { HmacWordSource } from "../src/words.js";
import { ListWordSource, wordOfBytes, wordOfLanes16, wordOfLanes32 } from "./support.js";

test("bernoulli: one word a draw, word < T", () => {
  const T = 1000n;
  const source = new ListWordSource([999n, 1000n, 1001n, 0n]);
  assert.deepEqual(bernoulli(source, T, 3), [true, false, false]);
  assert.equal(source.left, 1);
  assert.deepEqual(bernoulli(new ListWordSource([MAX_WORD]), MAX_WORD, 1), [false]);
});

test("bernoulliLazy: a byte a draw, a tie takes a word in order, (w >> 8) < low", () => {
  const T = (0x80n << 56n) | 1n; // high byte 0x80, low 56 bits 1
  const bytes = [0x7f, 0x80, 0x81, 0x80, 0x00, 0xff, 0x80, 0x10, 0x22];
  const source = new ListWordSource([
    wordOfBytes(bytes.slice(0, 8)),
    wordOfBytes(bytes.slice(8)),
    0xffn, // tie at 1: 0xff >> 8 = 0 < 1
    0x100n, // tie at 3: 1 < 1 is false
    0x0n, // tie at 6: true
    42n, // not consumed
  ]);
  assert.deepEqual(bernoulliLazy(source, T, 9), [true, true, false, false, true, false, true, true, true]);
  assert.equal(source.left, 1);
  // with low 56 bits zero a tie is simply false and takes no word
  const even = new ListWordSource([wordOfBytes([0x80, 0x7f])]);
  assert.deepEqual(bernoulliLazy(even, 0x80n << 56n, 2), [false, true]);
  assert.equal(even.left, 0);
});

test("bernoulliLazy is bernoulli on the word byte·2^56 + (tie word >> 8), exhaustively over bytes", () => {
  for (const T of [0n, 1n, (0x37n << 56n) | 0xabcdefn, 1n << 63n, MAX_WORD]) {
    for (let byte = 0; byte < 256; byte++) {
      for (const tie of [0n, 0x1234n, MAX_WORD]) {
        const source = new ListWordSource([BigInt(byte), tie]);
        const [draw] = bernoulliLazy(source, T, 1);
        const composite = (BigInt(byte) << 56n) | (tie >> 8n);
        const tookTie = source.left === 0;
        const decidedByByte = BigInt(byte) !== T >> 56n || (T & ((1n << 56n) - 1n)) === 0n;
        assert.equal(tookTie, !decidedByByte, `T=${T} byte=${byte}`);
        const expected = decidedByByte ? BigInt(byte) < T >> 56n : composite < T;
        assert.equal(draw, expected, `T=${T} byte=${byte} tie=${tie}`);
      }
    }
  }
});

test("uniformBelow: words below 2^64 - 2^64 mod high, rejected draws redrawn together in order", () => {
  // 2^64 mod 3 = 1: only the largest word is rejected
  const source = new ListWordSource([MAX_WORD, 7n, MAX_WORD, 5n, 4n, 9n]);
  assert.deepEqual(uniformBelow(source, 3, 3), [2n, 1n, 1n]); // draws 0 and 2 redrawn from 5 and 4
  assert.equal(source.left, 1);
  // one high per draw: high 1 accepts every word; the second draw is rejected once
  const per = new ListWordSource([MAX_WORD, MAX_WORD, 7n]);
  assert.deepEqual(uniformBelow(per, [1, 3n], 2), [0n, 1n]);
  assert.equal(per.left, 0);
  const big = (1n << 63n) - 1n;
  assert.deepEqual(uniformBelow(new ListWordSource([big + 5n]), big, 1), [5n]);
  assert.throws(() => uniformBelow(new ListWordSource([]), 1n << 63n, 1), /high must be in/);
  assert.throws(() => uniformBelow(new ListWordSource([]), [2, 3], 3), /length 3/);
});

test("uniformBelow32 on 16-bit lanes is exactly uniform: every output has ⌊2^16/high⌋ accepted lanes", () => {
  for (const high of [1, 3, 5, 7, 100, 4096]) {
    const counts = new Array<number>(high).fill(0);
    for (let lane = 0; lane < 65536; lane++) {
      const source = new ListWordSource([BigInt(lane), wordOfLanes16([0x8001])]);
      const [value] = uniformBelow32(source, high, 1);
      const rejected = (lane * high) % 65536 < 65536 % high;
      assert.equal(source.left, rejected ? 0 : 1, `high=${high} lane=${lane}`);
      if (!rejected) {
        assert.equal(value, Math.floor((lane * high) / 65536));
        counts[value!]! += 1;
      }
    }
    assert.ok(counts.every((c) => c === Math.floor(65536 / high)), `high=${high}: ${counts.slice(0, 5)}`);
  }
});

test("uniformBelow32: 32-bit lanes above 2^12, the rejected redrawn over their own highs", () => {
  // four 16-bit lanes a word; lane 0 rejected for high 3 (0·3 mod 2^16 < 1)
  const small = new ListWordSource([wordOfLanes16([0, 0xffff, 0x8000, 0x5555]), wordOfLanes16([0x4000])]);
  assert.deepEqual(uniformBelow32(small, 3, 4), [0, 2, 1, 0]);
  assert.equal(small.left, 0);
  // highs [3, 5000] use 32-bit lanes; draw 0 (lane 0) is rejected (2^32 mod 3 = 1) and redrawn
  // alone over high 3, hence on a 16-bit lane
  const mixed = new ListWordSource([wordOfLanes32([0, 2 ** 31 + 1]), wordOfLanes16([0xffff])]);
  assert.deepEqual(uniformBelow32(mixed, [3, 5000], 2), [2, 2500]);
  assert.equal(mixed.left, 0);
  // a scalar high above 2^12 keeps 32-bit lanes when redrawn
  const wide = new ListWordSource([wordOfLanes32([0, 0xffffffff]), wordOfLanes32([0x80000001])]);
  assert.deepEqual(uniformBelow32(wide, 5000, 2), [2500, 4999]);
  assert.deepEqual(uniformBelow32(new ListWordSource([wordOfLanes32([0xffffffff])]), 2 ** 32, 1), [2 ** 32 - 1]);
  assert.throws(() => uniformBelow32(new ListWordSource([]), 2 ** 32 + 1, 1), /high must be integers in \[1, 2\*\*32\]/);
});

test("uniformBelowBits: the top bitlen(high - 1) bits of 32-bit lanes, redrawn while >= high", () => {
  for (let top = 0; top < 8; top++) {
    const source = new ListWordSource([wordOfLanes32([top * 2 ** 29 + 12345, 0]), 0n]);
    const [value] = uniformBelowBits(source, 5, 1);
    if (top < 5) {
      assert.equal(value, top);
      assert.equal(source.left, 1);
    } else {
      assert.equal(value, 0); // redrawn from the next word's lane 0
      assert.equal(source.left, 0);
    }
  }
  const source = new ListWordSource([wordOfLanes32([0xffffffff, 0x40000000]), wordOfLanes32([0x20000000])]);
  assert.deepEqual(uniformBelowBits(source, 5, 2), [1, 2]);
  const P = 2 ** 31 - 1;
  const lanes = new ListWordSource([wordOfLanes32([2 * (P - 1), 2 * P])]);
  assert.deepEqual(uniformBelowBits(lanes, P, 1), [P - 1]);
  assert.throws(() => uniformBelowBits(new ListWordSource([]), 1, 1), /high must be in \[2, 2\*\*32\]/);
});

test("randomBits: little-endian bytes of the words, most significant bit first", () => {
  const source = new ListWordSource([wordOfBytes([0x80, 0x01]), 1n << 63n]);
  const bits = randomBits(source, 128);
  const set = bits.flatMap((bit, i) => (bit ? [i] : []));
  assert.deepEqual(set, [0, 15, 64 + 56]);
  assert.equal(randomBits(new ListWordSource([1n << 63n]), 64).length, 64);
  assert.equal(randomBits(new ListWordSource([]), 0).length, 0);
});

test("sampleSubsets: Floyd's algorithm, one uniformBelow(j + 1, n) per step j, rows sorted", () => {
  // d = 5, k = 2: steps j = 3, 4; row 0 draws 1 then 1 (taken: 4); row 1 draws 3 then 0
  const source = new ListWordSource([1n, 3n, 1n, 0n]);
  assert.deepEqual(sampleSubsets(source, 2, 5, 2), [
    [1, 4],
    [0, 3],
  ]);
  assert.equal(source.left, 0);
  assert.deepEqual(sampleSubsets(new ListWordSource([]), 1, 3, 3), [[0, 1, 2]]);
  // uniform: every 2-subset of [0, 4) equally often over exhaustive small words
  const counts = new Map<string, number>();
  for (let a = 0n; a < 3n; a++) for (let b = 0n; b < 4n; b++) {
    const key = sampleSubsets(new ListWordSource([a, b]), 1, 4, 2)[0]!.join(",");
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  assert.equal(counts.size, 6);
  assert.ok([...counts.values()].every((c) => c === 2));
});

test("randomizedRound: float64 phi, up when word < min(⌊phi·2^64⌋, 2^64 - 2048) or phi >= 1", () => {
  const quarter = 1n << 62n;
  const source = new ListWordSource([quarter - 1n, quarter, MAX_WORD, 1n << 63n, 0n]);
  assert.deepEqual(randomizedRound(source, [2.25, 2.25, 4, 0.5, 7], 4), [3, 2, 4, 0, 4]);
  assert.deepEqual(randomizedRound(new ListWordSource([0n, MAX_WORD]), [-1.5, 10.5]), [-1, 10]);
  // phi just below 1: the threshold is capped at 2^64 - 2048
  const below = 1 - 2 ** -53;
  assert.deepEqual(randomizedRound(new ListWordSource([WORD_SPAN - 2048n, WORD_SPAN - 2049n]), [below, below]), [0, 1]);
});

// ---- bernoulliBytes: the cell of a lazily drawn uniform number ------------------------------

function cumulative(T: bigint): bigint[] {
  const out = [0n];
  for (let b = 0; b < 256; b++) {
    let w = 0n;
    for (let bit = 0; bit < 8; bit++) w += BigInt((b >> bit) & 1);
    out.push(out[b]! + T ** w * (WORD_SPAN - T) ** (8n - w));
  }
  assert.equal(out[256], 1n << 512n);
  return out;
}

/** The byte whose cell [C[b], C[b+1]) holds x (a 512-bit integer). */
function cellOf(c: readonly bigint[], x: bigint): number {
  let b = 0;
  while (c[b + 1]! <= x) b++;
  return b;
}

function headsDeciding(c: readonly bigint[]): number {
  let count = 0;
  for (let h = 0n; h < 256n; h++) if (cellOf(c, h << 504n) === cellOf(c, ((h + 1n) << 504n) - 1n)) count++;
  return count;
}

test("bernoulliBytes at q = 1/2 is the head bytes themselves (every byte equally likely)", () => {
  const words = [0x0123456789abcdefn, 0xfedcba9876543210n];
  const out = bernoulliBytes(new ListWordSource(words), 1n << 63n, 16);
  const expected = [...new Uint8Array(BigUint64Array.from(words).buffer)];
  assert.deepEqual([...out], expected);
});

test("bernoulliBytes on 16-bit lanes: every lane gives the cell of its number, straddlers take a word", () => {
  for (const q of [0.27, 0.4]) {
    const T = probabilityThreshold(q, "nearest");
    const c = cumulative(T);
    assert.ok(headsDeciding(c) < 192, `q=${q} should use 16-bit lanes`);
    const refineWord = 0x9e3779b97f4a7c15n;
    let straddlers = 0;
    for (let lane = 0; lane < 65536; lane++) {
      const source = new ListWordSource([BigInt(lane), refineWord, 0n]);
      const [byte] = bernoulliBytes(source, T, 1);
      const low = BigInt(lane) << 496n;
      const decided = cellOf(c, low) === cellOf(c, low + (1n << 496n) - 1n);
      assert.equal(source.left, decided ? 2 : 1, `lane ${lane}`);
      if (!decided) straddlers++;
      const x = decided ? low : (BigInt(lane) << 496n) | (refineWord << 432n);
      assert.equal(byte, cellOf(c, x), `q=${q} lane=${lane}`);
    }
    assert.ok(straddlers > 0 && straddlers <= 255);
  }
});

test("bernoulliBytes with 8-bit heads: undecided heads take a byte each from new words, in order", () => {
  const T = probabilityThreshold(0.02, "nearest");
  const c = cumulative(T);
  assert.ok(headsDeciding(c) >= 192);
  const undecided: number[] = [];
  for (let h = 0; h < 256; h++) {
    if (cellOf(c, BigInt(h) << 504n) !== cellOf(c, (BigInt(h + 1) << 504n) - 1n)) undecided.push(h);
  }
  assert.ok(undecided.length > 1);
  // two draws: a decided head (0) and an undecided one; the latter's tail byte comes from word 2
  const h = undecided[0]!;
  for (let tail = 0; tail < 256; tail++) {
    const source = new ListWordSource([wordOfBytes([0, h]), wordOfBytes([tail]), 0x5555555555555555n, 0n]);
    const out = bernoulliBytes(source, T, 2);
    assert.equal(out[0], cellOf(c, 0n));
    const lane = (BigInt(h) << 8n) | BigInt(tail);
    const low = lane << 496n;
    const decided = cellOf(c, low) === cellOf(c, low + (1n << 496n) - 1n);
    assert.equal(source.left, decided ? 2 : 1);
    const x = decided ? low : low | (0x5555555555555555n << 432n);
    assert.equal(out[1], cellOf(c, x), `tail ${tail}`);
  }
});

test("bernoulliBytes: an 80-bit prefix on a cell boundary draws one more word at a time", () => {
  const T = probabilityThreshold(0.27, "nearest");
  const c = cumulative(T);
  // a boundary that is not a multiple of 2^432: its 80-bit prefix interval straddles it
  const boundary = c.find((v) => v % (1n << 432n) !== 0n && v > 0n && v < 1n << 512n)!;
  const lane = boundary >> 496n;
  const word = (boundary >> 432n) & MAX_WORD;
  for (const extra of [0n, MAX_WORD]) {
    const source = new ListWordSource([lane, word, extra, 77n]);
    const [byte] = bernoulliBytes(source, T, 1);
    assert.equal(source.left, 1, "three words: the lane, the refining word, one more");
    assert.equal(byte, cellOf(c, (lane << 496n) | (word << 432n) | (extra << 368n)));
  }
});

test("bernoulliBytes bits have probability T/2^64 (exact cells: byte frequencies at a fixed seed)", () => {
  const T = probabilityThreshold(0.12, "nearest");
  const bytes = bernoulliBytes(new HmacWordSource(new Uint8Array(32).fill(7)), T, 20000);
  let ones = 0;
  for (const byte of bytes) for (let bit = 0; bit < 8; bit++) ones += (byte >> bit) & 1;
  const n = 8 * bytes.length;
  const q = 0.12;
  const z = (ones - n * q) / Math.sqrt(n * q * (1 - q));
  assert.ok(Math.abs(z) < 4, `z = ${z}`); // 4 standard errors at a fixed seed
});
