// The mechanism loader (src/mechanisms/loader.ts): each group's code is imported when a campaign
// first needs it. This file imports the client and the loader, never the registry before its
// last test, so the groups start unloaded as in a browser.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import { describe, test } from "node:test";
import { TelemetryClient } from "../src/client.js";
import { PolicyViolation, PrivacyPolicy } from "../src/policy.js";
import { type GroupLoader, loadedMechanism, loadMechanism, MECHANISM_GROUPS, mechanismFromLoaded, mechanismName } from "../src/mechanisms/loader.js";
import type { MechanismConfig } from "../src/mechanisms/types.js";
import { HmacWordSource } from "../src/words.js";

const LABELS = ["light", "dark", "system"];

function documentText(name: string, epsilon: string): string {
  const mechanism = `{"epsilon":${epsilon},"k":3,"mechanism":"grr"}`;
  const content = `{"domain":${JSON.stringify(LABELS)},"mechanism":${mechanism},"min_batch_size":100,"policy":null}`;
  const id = createHash("sha256").update(content).digest("hex").slice(0, 32);
  return `{"name":"${name}","protocol":1,"mechanism":${mechanism},"domain":${JSON.stringify(LABELS)},"policy":null,"min_batch_size":100,"config_id":"${id}","created":"2026-12-04T00:00:00Z"}`;
}

const GRR: MechanismConfig = { mechanism: "grr", epsilon: 1.0, k: 3 };

describe("loading mechanism groups", () => {
  test("a pinned campaign whose group is not loaded yet is checked before any operation runs", async () => {
    assert.equal(loadedMechanism(GRR), undefined);
    assert.throws(() => mechanismFromLoaded(GRR), /mechanism "grr": its code is not loaded in this bundle yet; call `await loadMechanism\(config\)`/);
    // the constructor cannot build the mechanism at once: the policy check waits for its chunk
    const refused = new TelemetryClient("http://127.0.0.1:9", {
      campaigns: [documentText("theme", "6.0")],
      policy: new PrivacyPolicy({ max_epsilon: 2 }),
      flushOnPagehide: false,
    });
    await assert.rejects(refused.record("theme", "dark"), PolicyViolation);
    await assert.rejects(refused.pending(), PolicyViolation);
    // once loaded, the same construction is synchronous again (and throws at once)
    assert.notEqual(loadedMechanism(GRR), undefined);
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [documentText("theme", "6.0")], policy: new PrivacyPolicy({ max_epsilon: 2 }) }),
      PolicyViolation,
    );
    const accepted = new TelemetryClient("http://127.0.0.1:9", {
      campaigns: [documentText("theme", "1.0")],
      rng: new HmacWordSource(new Uint8Array(32).fill(3)),
      flushOnPagehide: false,
    });
    assert.match((await accepted.record("theme", "dark")) ?? "", /^[0-9a-f]{32}$/);
    assert.equal(await accepted.pending("theme"), 1);
  });

  test("a loaded mechanism draws the same words as the one loadMechanism builds", async () => {
    const config: MechanismConfig = { mechanism: "duchi", epsilon: 1.0, lower: 0.0, upper: 10.0 };
    const lazy = await loadMechanism(config);
    const again = mechanismFromLoaded(config);
    const key = new Uint8Array(32).fill(9);
    const values = [0, 2.5, 10, 7.25];
    assert.deepEqual(lazy.toWire(lazy.perturb(values, { rng: new HmacWordSource(key) })), again.toWire(again.perturb(values, { rng: new HmacWordSource(key) })));
  });

  test("each group's module defines exactly the names the loader maps to it", async () => {
    const groups = new Map<GroupLoader, string[]>();
    for (const [name, group] of Object.entries(MECHANISM_GROUPS)) groups.set(group, [...(groups.get(group) ?? []), name]);
    // one loader per module under src/mechanisms/groups/ (each a chunk of the browser bundle)
    const modules = readdirSync(new URL("../src/mechanisms/groups/", import.meta.url)).filter((file) => file.endsWith(".js"));
    assert.equal(groups.size, modules.length);
    for (const [group, names] of groups) assert.deepEqual(Object.keys(await group()).sort(), names.sort());
  });

  test("a config that is not a device mechanism's is refused naming the field and the type", async () => {
    assert.throws(() => mechanismName(null as unknown as MechanismConfig), /config must be an object, got null/);
    assert.throws(() => mechanismName([] as unknown as MechanismConfig), /config must be an object, got object/);
    assert.throws(() => mechanismName({ mechanism: 7 } as unknown as MechanismConfig), /config.mechanism must be a string, got number/);
    await assert.rejects(loadMechanism({ mechanism: "rr-dp" }), /mechanism "rr-dp" is not supported in this version of ldp-telemetry \(supported: blh, cms, /);
  });

  test("the registry (Node's synchronous mechanismFromConfig) has exactly the loader's names", async () => {
    const { FACTORIES, mechanismFromConfig } = await import("../src/mechanisms/registry.js");
    assert.deepEqual(Object.keys(FACTORIES).sort(), Object.keys(MECHANISM_GROUPS).sort());
    assert.equal(mechanismFromConfig({ mechanism: "cms", epsilon: 4.0, hashes: 4, m: 64, max_length: 16, seed: 0 }).name, "cms");
    assert.throws(() => mechanismFromConfig({ mechanism: "rr-dp" }), /mechanism "rr-dp" is not supported in this version/);
  });
});
