/**
 * The widest payload of each mechanism that states one, and the sealed plaintext size of a
 * shuffled campaign (which fixes its envelope size), equal the Python SDK's
 * (test/fixtures/make_wire_bounds.py wrote test/fixtures/wire-bounds.json).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import type { MechanismConfig } from "../src/mechanisms/types.js";
import { plaintextSize } from "../src/sealing.js";

interface BoundCase {
  config: MechanismConfig;
  campaign: string;
  config_id: string;
  largest: unknown;
  plaintext_size: number;
}

function fixture(): BoundCase[] {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++) {
    try {
      return (JSON.parse(readFileSync(join(dir, "test", "fixtures", "wire-bounds.json"), "utf8")) as { cases: BoundCase[] }).cases;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error("test/fixtures/wire-bounds.json not found");
}

for (const c of fixture()) {
  test(`${JSON.stringify(c.config)}: widest payload and sealed size as Python's`, () => {
    const mechanism = mechanismFromConfig(c.config);
    assert.ok(mechanism.largestWirePayload !== undefined, `${c.config.mechanism} states no widest payload`);
    const largest = mechanism.largestWirePayload();
    assert.deepEqual(largest, c.largest);
    assert.equal(plaintextSize(c.campaign, c.config_id, largest), c.plaintext_size);
  });
}
