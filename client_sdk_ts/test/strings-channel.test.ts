/**
 * The implemented channels, sampled: over many reports from a fixed-seed source, the rate at
 * which a report agrees with the truth is the threshold's probability within 4 standard errors
 * (a broken flip, a wrong bucket or a skipped word shows as tens of standard errors).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { Cms, Hcms } from "../src/mechanisms/sketch.js";
import type { Pem } from "../src/mechanisms/pem.js";
import { parity, representable, sketchBucket } from "../src/mechanisms/string-support.js";
import { HmacWordSource } from "../src/words.js";

const Z = 4;

function assertRate(hits: number, trials: number, threshold: bigint, what: string): void {
  const p = Number(threshold) / 2 ** 64;
  const se = Math.sqrt((p * (1 - p)) / trials);
  const rate = hits / trials;
  assert.ok(Math.abs(rate - p) <= Z * se, `${what}: rate ${rate} vs ${p} (±${Z}·${se.toPrecision(3)})`);
}

const source = (label: string): HmacWordSource => new HmacWordSource(new TextEncoder().encode(`ldp-telemetry/ts-channel/${label}`));

test("cms: the value's bucket is set with probability 1 - q, every other bit with q", () => {
  const config = { mechanism: "cms", epsilon: 2.0, m: 32, hashes: 3, max_length: 8, seed: 11 };
  const m = mechanismFromConfig(config) as unknown as Cms;
  const n = 4000;
  const reports = m.perturb(Array<string>(n).fill("héllo"), { rng: source("cms") });
  const raw = representable("héllo", 8);
  let hit = 0;
  let others = 0;
  const rows = [0, 0, 0];
  for (const { row, bits } of reports) {
    rows[row] = (rows[row] as number) + 1;
    const bucket = sketchBucket(raw, row, 3, 32, 11);
    for (let i = 0; i < 32; i++) {
      const set = (((bits[i >> 3] as number) >> (7 - (i & 7))) & 1) === 1;
      if (i === bucket) hit += set ? 1 : 0;
      else others += set ? 1 : 0;
    }
  }
  assertRate(n - hit, n, m.flipThreshold, "cms bucket flipped");
  assertRate(others, 31 * n, m.flipThreshold, "cms other bits");
  for (const count of rows) assertRate(count, n, (1n << 64n) / 3n, "cms row");
});

test("hcms: the reported sign agrees with the Hadamard coefficient with probability 1 - q", () => {
  const config = { mechanism: "hcms", epsilon: 1.0, m: 64, hashes: 2, max_length: 8, seed: 3 };
  const m = mechanismFromConfig(config) as unknown as Hcms;
  const n = 20000;
  const raw = representable("日本", 8);
  let flipped = 0;
  for (const report of m.perturb(Array<string>(n).fill("日本"), { rng: source("hcms") })) {
    const sign = report & 1;
    const column = (report >> 1) % 64;
    const row = Math.floor((report >> 1) / 64);
    const plus = parity(sketchBucket(raw, row, 2, 64, 3) & column) === 0 ? 1 : 0;
    flipped += sign !== plus ? 1 : 0;
  }
  assertRate(flipped, n, m.flipThreshold, "hcms sign flipped");
});

test("pem: the report's bucket is the hashed prefix with probability p", () => {
  const config = { mechanism: "pem", epsilon: 1.5, max_length: 4, start_bits: 7, step_bits: 4, g: 5, final_weight: 1 };
  const m = mechanismFromConfig(config) as unknown as Pem;
  const n = 20000;
  const bits = m.valueBits("ab", representable("ab", 4));
  let kept = 0;
  for (const report of m.perturb(Array<string>(n).fill("ab"), { rng: source("pem") })) {
    kept += report.y === m.bucket(report.seed, bits, report.level) ? 1 : 0;
  }
  assertRate(kept, n, m.keepThreshold, "pem kept");
});
