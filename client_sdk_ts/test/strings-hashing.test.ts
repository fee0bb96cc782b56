/**
 * What the string mechanisms compute once per batch (Python's `distinct_strings`): each distinct
 * string is encoded and hashed once, whatever the batch's size; and PEM's bucket, computed in
 * doubles, against the exact integer formula.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { Cms, Hcms } from "../src/mechanisms/sketch.js";
import type { Sfp } from "../src/mechanisms/sfp.js";
import type { Pem } from "../src/mechanisms/pem.js";
import { RESERVED, distinctStrings, representable } from "../src/mechanisms/string-support.js";
import { uniformBelow } from "../src/samplers.js";
import { HmacWordSource } from "../src/words.js";

const source = (label: string): HmacWordSource => new HmacWordSource(new TextEncoder().encode(`ldp-telemetry/ts-hashing/${label}`));

test("distinctStrings: first-seen order, every unrepresentable value the one reserved symbol", () => {
  const { encoded, inverse } = distinctStrings(["b", "a", "b", "toolong", "\ud800", "a", "toolong2"], (v) => representable(v, 4));
  assert.deepEqual(encoded.slice(0, 2), [Uint8Array.of(0x62), Uint8Array.of(0x61)]);
  assert.equal(encoded.length, 3);
  assert.equal(encoded[2], RESERVED);
  assert.deepEqual(Array.from(inverse), [0, 1, 0, 2, 2, 1, 2]);
});

/** Counts the values `hash.table` is asked to hash. */
function countHashed(hash: { table(raws: readonly Uint8Array[]): Uint32Array }): { hashed: number } {
  const count = { hashed: 0 };
  const table = hash.table.bind(hash);
  hash.table = (raws) => {
    count.hashed += raws.length;
    return table(raws);
  };
  return count;
}

const VALUES = Array.from({ length: 5000 }, (_, i) => ["home", "search", "a-value-too-long-to-carry", "\ud800"][i % 4] as string);

for (const name of ["cms", "hcms"]) {
  test(`${name}: a batch of 5,000 values hashes its 3 distinct encodings once each`, () => {
    const m = mechanismFromConfig({ mechanism: name, epsilon: 2.0, m: 64, hashes: 4, max_length: 16, seed: 1 }) as unknown as Cms | Hcms;
    const count = countHashed(m.hash);
    assert.equal(m.perturb(VALUES, { rng: source(name) }).length, VALUES.length);
    assert.equal(count.hashed, 3);
  });
}

test("sfp: a batch of 5,000 values hashes its 3 distinct encodings once each", () => {
  const config = { mechanism: "sfp", epsilon: 4.0, fragment_blocks: 9, fragment_share: 0.75, hashes: 4, m: 256, max_length: 8, seed: 0 };
  const m = mechanismFromConfig(config) as unknown as Sfp;
  const count = countHashed(m.word.hash);
  assert.equal(m.perturb(VALUES, { rng: source("sfp") }).length, VALUES.length);
  assert.equal(count.hashed, 3);
});

test("pem: the bucket in doubles is the exact floor(g·((b + sum a_t·x_t) mod P)/P), extremes included", () => {
  const P = 2n ** 31n - 1n;
  const config = { mechanism: "pem", epsilon: 2.0, max_length: 32, start_bits: 6, step_bits: 12, g: 65536, final_weight: 1 };
  const m = mechanismFromConfig(config) as unknown as Pem;
  const rng = source("pem");
  const exact = (seed: readonly number[], bits: readonly number[], level: number): number => {
    const prefix = m.levelBits(level);
    let r = BigInt(seed[seed.length - 1] as number);
    for (let t = 0; t < m.chunkCount(level); t++) {
      let chunk = 0n;
      for (let i = 30 * t; i < Math.min(prefix, 30 * t + 30); i++) chunk = (chunk << 1n) | BigInt(bits[i] as number);
      r = (r + BigInt(seed[t] as number) * chunk) % P;
    }
    return Number((r * 65536n) / P);
  };
  const width = m.seedWidth;
  for (let trial = 0; trial < 400; trial++) {
    const level = trial % m.levels;
    // the largest coefficients and all-one bits first (the products closest to 2^61), then random
    const seed = trial < m.levels ? new Array<number>(width).fill(Number(P) - 1) : uniformBelow(rng, P, width).map(Number);
    const bits =
      trial < m.levels ? new Array<number>(m.totalBits).fill(1) : uniformBelow(rng, 2, m.totalBits).map(Number);
    assert.equal(m.bucket(seed, bits, level), exact(seed, bits, level), `trial ${trial}, level ${level}`);
  }
});
