/** TEMPORARY: the generic samplers this group needs until h-tscore's src/samplers.ts is merged. */
import type { WordSource } from "./words.js";

const SPAN = 1n << 64n;

export function rawWords(rng: WordSource, n: number): BigUint64Array {
  return rng.words(n);
}

export function uniformBelow(rng: WordSource, high: bigint | readonly bigint[], n: number): bigint[] {
  const highs = typeof high === "bigint" ? new Array<bigint>(n).fill(high) : high;
  const out = new Array<bigint>(n).fill(0n);
  let pending = Array.from({ length: n }, (_, i) => i);
  while (pending.length > 0) {
    const words = rng.words(pending.length);
    const again: number[] = [];
    pending.forEach((index, j) => {
      const h = highs[index] as bigint;
      const word = words[j] as bigint;
      if (word < SPAN - (SPAN % h)) out[index] = word % h;
      else again.push(index);
    });
    pending = again;
  }
  return out;
}

export function randomBits(rng: WordSource, n: number): boolean[] {
  const words = rng.words(Math.ceil(n / 64));
  const out: boolean[] = [];
  for (let i = 0; i < n; i++) {
    const word = words[i >> 6] as bigint;
    const byte = Number((word >> BigInt(8 * ((i >> 3) & 7))) & 0xffn);
    out.push(((byte >> (7 - (i & 7))) & 1) === 1);
  }
  return out;
}

export function bernoulli(rng: WordSource, threshold: bigint, n: number): boolean[] {
  return Array.from(rng.words(n), (w) => w < threshold);
}

export function sampleSubsets(rng: WordSource, n: number, d: number, k: number): number[][] {
  const rows = Array.from({ length: n }, () => [] as number[]);
  if (k === d) return rows.map(() => Array.from({ length: d }, (_, i) => i));
  for (let j = d - k; j < d; j++) {
    const r = uniformBelow(rng, BigInt(j + 1), n);
    rows.forEach((row, i) => {
      const v = Number(r[i]);
      row.push(row.includes(v) ? j : v);
    });
  }
  return rows.map((row) => row.sort((a, b) => a - b));
}

const TOP_THRESHOLD = 2 ** 64 - 2048;

export function randomizedRound(rng: WordSource, u: readonly number[], top?: number): number[] {
  const base: number[] = [];
  const phi: number[] = [];
  for (let value of u) {
    if (top !== undefined) value = Math.min(Math.max(value, 0), top);
    let b = Math.floor(value);
    if (top !== undefined && top >= 1) b = Math.min(b, top - 1);
    base.push(b);
    phi.push(value - b);
  }
  const words = rng.words(u.length);
  return base.map((b, i) => {
    const p = phi[i] as number;
    const threshold = BigInt(Math.min(Math.floor(p * 2 ** 64), TOP_THRESHOLD));
    return (words[i] as bigint) < threshold || p >= 1 ? b + 1 : b;
  });
}
