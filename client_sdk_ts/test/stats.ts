/** Goodness-of-fit helpers for the sampler tests (fixed seeds, stated tolerances). */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import type { WordSource } from "../src/words.js";

/** |observed - expected| <= z·sd. */
export function assertWithinZ(observed: number, expected: number, sd: number, what: string, z = 5): void {
  assert.ok(Math.abs(observed - expected) <= z * sd, `${what}: ${observed} vs ${expected} ± ${z}·${sd}`);
}

/**
 * Pearson's chi-square statistic of `observed` counts against cell `probabilities`, turned into
 * a standard normal score by Wilson & Hilferty's cube-root approximation (1931): a score above
 * 4.75 is a p-value below about 1e-6.
 */
export function chiSquareScore(observed: readonly number[], probabilities: readonly number[]): number {
  const n = observed.reduce((a, b) => a + b, 0);
  let chi = 0;
  observed.forEach((count, i) => {
    const expected = n * (probabilities[i] as number);
    chi += (count - expected) ** 2 / expected;
  });
  const k = observed.length - 1;
  return (Math.cbrt(chi / k) - (1 - 2 / (9 * k))) / Math.sqrt(2 / (9 * k));
}

export function assertChiSquare(observed: readonly number[], probabilities: readonly number[], what: string): void {
  const total = probabilities.reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(total - 1) < 1e-9, `${what}: cell probabilities sum to ${total}`);
  const score = chiSquareScore(observed, probabilities);
  assert.ok(score < 4.75, `${what}: chi-square score ${score.toFixed(2)} (p below 1e-6)`);
}

/**
 * A seeded word source for statistical tests: HmacWordSource's construction (HMAC-SHA256 of a
 * big-endian block counter, four little-endian words per block) on node:crypto's native HMAC,
 * so that tens of thousands of draws stay quick.
 */
export class SeededWords implements WordSource {
  readonly #key: Buffer;
  #block = 0n;
  #buffer: bigint[] = [];
  #offset = 0;

  constructor(seed: number) {
    this.#key = Buffer.alloc(32, seed);
  }

  words(count: number): BigUint64Array {
    const out = new BigUint64Array(count);
    for (let i = 0; i < count; i++) {
      if (this.#offset === this.#buffer.length) {
        const counter = Buffer.alloc(8);
        counter.writeBigUInt64BE(this.#block++);
        const mac = createHmac("sha256", this.#key).update(counter).digest();
        this.#buffer = [0, 8, 16, 24].map((at) => mac.readBigUInt64LE(at));
        this.#offset = 0;
      }
      out[i] = this.#buffer[this.#offset++] as bigint;
    }
    return out;
  }
}
