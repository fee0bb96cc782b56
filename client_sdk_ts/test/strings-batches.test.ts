/**
 * Batches of values (one perturb call) give the Python SDK's payloads, words drawn in its
 * vectorized order, and every threshold equals Python's exactly. The expected outputs are the
 * Python SDK's (test/fixtures/make_string_batches.py wrote test/fixtures/string-batches.json);
 * the values cover non-ASCII, astral, empty, repeated, over-long and lone-surrogate strings.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { Cms, Hcms } from "../src/mechanisms/sketch.js";
import type { Pem } from "../src/mechanisms/pem.js";
import type { Sfp } from "../src/mechanisms/sfp.js";
import type { Pckv } from "../src/mechanisms/pckv.js";
import type { Multi } from "../src/mechanisms/multi.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "../src/mechanisms/types.js";
import { type JsonValue, parseJson, toPlain } from "../src/config.js";
import { DeviceKeys, memoScope } from "../src/memoization.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

interface BatchCase {
  config: MechanismConfig;
  /** The config as `parseJson` reads it (floats kept), for the memo scope. */
  configJson: JsonValue;
  values: unknown[];
  payloads: unknown[];
  thresholds: Record<string, unknown>;
  words_key: string;
  campaign?: string;
  device_secret?: string;
}

/** The fixture sits in test/fixtures/ (not copied by tsc): from dist/test/ go up to the package. */
function fixture(): BatchCase[] {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++) {
    let text: string;
    try {
      text = readFileSync(join(dir, "test", "fixtures", "string-batches.json"), "utf8");
    } catch {
      dir = dirname(dir);
      continue;
    }
    const raw = (parseJson(text) as { cases: Record<string, JsonValue>[] }).cases;
    if (!Array.isArray(raw)) throw new TypeError("the fixture needs a list of cases");
    return raw.map((c) => ({ ...(toPlain(c) as BatchCase), configJson: c.config as JsonValue }));
  }
  throw new Error("test/fixtures/string-batches.json not found");
}

/** The case's word source and (memoized cases) the device's keyed source under its scope. */
function sources(c: BatchCase): PerturbOptions {
  const rng = new HmacWordSource(fromHex(c.words_key));
  if (c.device_secret === undefined || c.campaign === undefined) return { rng };
  return { rng, keys: new DeviceKeys(fromHex(c.device_secret), memoScope(c.campaign, c.configJson)) };
}

/** The thresholds a mechanism computed, named as the fixture names Python's. */
function thresholdsOf(m: Mechanism): Record<string, unknown> {
  const s = (t: bigint): string => t.toString();
  switch (m.name) {
    case "cms":
    case "hcms": {
      const sketch = m as Cms | Hcms;
      return sketch.memo !== undefined
        ? { permanent_flip: s(sketch.memo.permanentFlip), keep: s(sketch.memo.keep) }
        : { flip: s(sketch.flipThreshold) };
    }
    case "pem": {
      const pem = m as Pem;
      return pem.memo !== undefined
        ? { permanent_keep: s(pem.memo.permanentKeep), again: s(pem.memo.again) }
        : { keep: s(pem.keepThreshold) };
    }
    case "sfp": {
      const sfp = m as Sfp;
      const memo = sfp.word.memo;
      return memo !== undefined && sfp.chain !== undefined
        ? {
            permanent_flip: s(memo.permanentFlip),
            keep: s(memo.keep),
            fragment_keep: s(sfp.fragment.keepThreshold),
            chain: s(sfp.chain.threshold),
          }
        : { flip: s(sfp.word.flipThreshold), fragment_keep: s(sfp.fragment.keepThreshold) };
    }
    case "pckv":
      return { thresholds: (m as Pckv).thresholds.map(s) };
    case "multi":
      return {
        oracles: (m as Multi).oracles.map((o) =>
          o.name === "oue" ? [o.name, s(o.p), s(o.q)] : [o.name, s(o.keep)],
        ),
      };
    default:
      throw new Error(`no thresholds for ${m.name}`);
  }
}

const cases = fixture();

test("the fixture covers every string and record mechanism, plain and memoized", () => {
  const names = new Set(cases.map((c) => `${c.config.mechanism}${"longitudinal" in c.config ? "+memo" : ""}`));
  for (const name of ["cms", "hcms", "pem", "sfp", "cms+memo", "hcms+memo", "pem+memo", "sfp+memo", "pckv", "multi"]) {
    assert.ok(names.has(name), name);
  }
});

cases.forEach((c, index) => {
  const label = `${c.config.mechanism} batch ${index} (${JSON.stringify(c.config)})`;
  test(`${label}: Python's payloads for the whole batch`, () => {
    const mechanism = mechanismFromConfig(c.config);
    const reports = mechanism.perturb(c.values, sources(c));
    assert.deepEqual(mechanism.toWire(reports), c.payloads);
  });
  test(`${label}: Python's thresholds, exactly`, () => {
    assert.deepEqual(thresholdsOf(mechanismFromConfig(c.config)), c.thresholds);
  });
});
