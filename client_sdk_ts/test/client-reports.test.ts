/**
 * TelemetryClient with a campaign of every mechanism the device registry builds, plain and
 * memoized: with the same device secret and words as the Python client, the queued payloads,
 * the epsilon the ledger charges for each report, a memoized campaign's memo keys and what
 * `status()` counts (reserved strings, pckv's counters) are Python's (test/fixtures/make_client_reports.py ran Python's TelemetryClient and wrote
 * test/fixtures/client-reports.json).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { configId, MemoryStorage, PrivacyPolicy, TelemetryClient } from "../src/index.js";
import { BudgetLedger } from "../src/ledger.js";
import { FACTORIES, mechanismFromConfig } from "../src/mechanisms/registry.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

interface ClientCase {
  document: string;
  device_secret: string;
  words_key: string;
  values: unknown[];
  payloads: unknown[];
  charges: number[];
  status: { reserved_values: Record<string, number>; counters: Record<string, Record<string, number>> };
  memo_keys: string[] | null;
  epsilon: number;
  epsilon_inf: number | null;
}

/** The fixture sits in test/fixtures/ (not copied by tsc): from dist/test/ go up to the package. */
function fixture(): ClientCase[] {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++) {
    try {
      return (JSON.parse(readFileSync(join(dir, "test", "fixtures", "client-reports.json"), "utf8")) as { cases: ClientCase[] }).cases;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error("test/fixtures/client-reports.json not found");
}

/** The fixture's policy (make_client_reports.py `POLICY`). */
const POLICY = {
  max_epsilon: 20,
  max_epsilon_inf: 40,
  max_delta: 1e-5,
  allow_pseudonymous_memoization: true,
  budget: { epsilon_per_report: 20.0, reports_per_period: 1000, period_seconds: 86400 },
};

/** A client whose storage holds `c.device_secret` as its device secret, with a new ledger sealed under it. */
async function clientWith(c: ClientCase, policy = POLICY): Promise<{ client: TelemetryClient; storage: MemoryStorage }> {
  const storage = new MemoryStorage();
  const ledger = new BudgetLedger(fromHex(c.device_secret), { ledger: null, head: null }, { expectExisting: false });
  await storage.set([["device_secret", c.device_secret], ...ledger.texts()]);
  const client = new TelemetryClient("http://127.0.0.1:9", {
    storage,
    campaigns: [c.document],
    policy: new PrivacyPolicy(policy),
    rng: new HmacWordSource(fromHex(c.words_key)),
    retries: 0,
  });
  return { client, storage };
}

async function queuedPayloads(storage: MemoryStorage): Promise<unknown[]> {
  const segments = JSON.parse((await storage.get("outbox")) ?? "[]") as number[];
  const out: unknown[] = [];
  for (const segment of segments) {
    for (const queued of JSON.parse((await storage.get(`outbox_${segment}`)) ?? "[]") as { payload: unknown }[]) out.push(queued.payload);
  }
  return out;
}

const nameOf = (c: ClientCase): string => (JSON.parse(c.document) as { name: string }).name;
const configOf = (c: ClientCase): Record<string, unknown> => (JSON.parse(c.document) as { mechanism: Record<string, unknown> }).mechanism;

describe("every mechanism through the client: the Python client's payloads and charges", () => {
  const cases = fixture();

  test("the fixture covers every mechanism of the registry, and each memoized one memoized too", () => {
    const covered = new Set(cases.map((c) => configOf(c).mechanism));
    assert.deepEqual([...covered].sort(), Object.keys(FACTORIES).sort());
    const memoized = new Set(cases.filter((c) => c.memo_keys !== null).map((c) => configOf(c).mechanism));
    for (const name of ["grr", "sue", "oue", "ss", "olh", "blh", "hr", "dbitflip", "rappor", "cms", "hcms", "sfp", "pem", "onebitmean"]) {
      assert.ok(memoized.has(name), `a memoized ${name} campaign`);
    }
  });

  for (const c of cases) {
    const name = nameOf(c);
    test(`${name}: payloads, charges and memo keys as Python's`, async () => {
      const { client, storage } = await clientWith(c);
      const ids = await client.recordMany(name, c.values);
      assert.equal(ids.length, c.values.length);
      assert.deepEqual(await queuedPayloads(storage), c.payloads);
      const log = (await client.privacyLog(name)).filter((row) => row.report !== null);
      assert.deepEqual(
        log.map((row) => row.epsilon),
        c.charges,
      );
      const ledger = JSON.parse((await storage.get("ledger")) as string) as { rows: { memo_key?: string }[] };
      const stored = ledger.rows.map((row) => row.memo_key).filter((key) => key !== undefined);
      assert.deepEqual(stored, c.memo_keys === null ? [] : [...new Set(c.memo_keys)]);
      // what the device counted: strings sent as the reserved symbol, pckv's records over padding
      const { reserved_values, counters } = client.status();
      assert.deepEqual({ reserved_values, counters }, c.status);
      assert.deepEqual(client.counters(name), c.status.counters[name] ?? {});
    });
  }

  test("a memoized campaign whose reports carry a pseudonym is refused unless the app allows it", () => {
    // memoized local hashing (L-LH sends the permanent seed), dBitFlip and PEM, as Python's policy
    const pseudonymous = cases.filter((c) => {
      const config = configOf(c);
      return c.memo_keys !== null && ["olh", "blh", "dbitflip", "pem"].includes(config.mechanism as string);
    });
    assert.equal(pseudonymous.length, 4);
    for (const c of pseudonymous) {
      assert.throws(
        () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [c.document], policy: new PrivacyPolicy({ ...POLICY, allow_pseudonymous_memoization: false }) }),
        /allow_pseudonymous_memoization is true in the campaign, the policy allows false/,
        nameOf(c),
      );
    }
    const unlinkable = cases.find((c) => c.memo_keys !== null && configOf(c).mechanism === "grr") as ClientCase;
    assert.doesNotThrow(
      () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [unlinkable.document], policy: new PrivacyPolicy({ ...POLICY, allow_pseudonymous_memoization: false }) }),
    );
  });

  test("one report's epsilon and a memoized campaign's epsilon_inf are Python's, to the bit", () => {
    // dbitflip's and onebitmean's (with a flip) are exact logs of the implemented probabilities
    for (const c of cases) {
      const config = configOf(c) as { mechanism: string; epsilon?: number };
      const mechanism = mechanismFromConfig(config);
      assert.equal(mechanism.privacyEpsilon ?? config.epsilon, c.epsilon, nameOf(c));
      assert.equal(mechanism.memoized === true ? mechanism.epsilonInf : null, c.epsilon_inf, nameOf(c));
    }
  });

  test("a later report of an already-paid memoized value costs nothing, and the ledger survives a restart", async () => {
    for (const c of cases.filter((c) => c.memo_keys !== null)) {
      const name = nameOf(c);
      const { client, storage } = await clientWith(c);
      await client.recordMany(name, c.values);
      await client.recordMany(name, [c.values[0]]);
      const after = (await client.privacyLog(name)).filter((row) => row.report !== null);
      assert.equal(after.at(-1)?.epsilon, 0, name);
      const again = new TelemetryClient("http://127.0.0.1:9", { storage, campaigns: [c.document], policy: new PrivacyPolicy(POLICY) });
      assert.equal(await again.ledgerDamage(), null, name);
    }
  });
});

describe("bad input names the field and the value's type, never the value", () => {
  const cases = fixture();
  const byMechanism = (mechanism: string): ClientCase => cases.find((c) => configOf(c).mechanism === mechanism) as ClientCase;
  const secret = "a-private-value-0123";

  for (const [mechanism, value, pattern] of [
    ["multi", secret, /the value at position 0 \(a string of 20 characters\) of campaign .* must be an object/],
    ["multi", { os: secret, theme: "dark", size: 1 }, /values\[0\], attribute "os" \(a string\) must be one of its 3 labels/],
    ["multi", { os: "ios", theme: "dark", size: 1, [secret]: 1 }, /values\[0\] has unknown attribute\(s\); the attributes are os, theme, size/],
    ["fourier", { a: 0, b: 1, c: 2 }, /values\[0\], attribute "c" \(a number\) must be an integer in \[0, 2\)/],
    ["hierarchical", secret, /the value at position 0 \(a string of 20 characters\) is not a label/],
    ["onebitmean", secret, /the value at position 0 \(a string of 20 characters\) of numeric campaign .* must be a finite number/],
    ["dbitflip", 7, /the value at position 0 \(a number\) is not a label/],
    ["pckv", [secret], /must be an object/],
    ["pem", 12, /must be a string/],
  ] as const) {
    test(`${mechanism}: ${String(pattern)}`, async () => {
      const c = byMechanism(mechanism);
      const { client } = await clientWith(c);
      await assert.rejects(
        client.record(nameOf(c), value),
        (error: Error) => pattern.test(error.message) && !error.message.includes(secret),
      );
      assert.equal(await client.pending(), 0);
    });
  }
});

describe("the domain as the mechanism's value kind wants it (Python: campaign.check_domain)", () => {
  /** A served document of `mechanism` (canonical JSON text) with `domain`, its config_id computed. */
  function documentOf(name: string, mechanism: string, domain: readonly string[] | null): string {
    const content = `{"domain":${JSON.stringify(domain)},"mechanism":${mechanism},"min_batch_size":100,"policy":null}`;
    const id = configId(JSON.parse(content)); // no integral float in these configs
    return `{"name":"${name}","protocol":1,"mechanism":${mechanism},"domain":${JSON.stringify(domain)},"policy":null,"min_batch_size":100,"config_id":"${id}"}`;
  }
  const PEM = '{"epsilon":4.5,"final_weight":1,"g":56,"max_length":4,"mechanism":"pem","start_bits":7,"step_bits":4}';
  const CMS = '{"epsilon":4.5,"hashes":4,"m":64,"max_length":16,"mechanism":"cms","seed":0}';
  const MULTI = '{"attributes":[{"k":2,"name":"a"}],"epsilon":2.5,"mechanism":"multi","protocol":"spl"}';

  test("a discovery mechanism's campaign has no domain; a sketch's is a candidate list; a record mechanism's none", () => {
    const policy = new PrivacyPolicy({ max_epsilon: 5 });
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { policy, campaigns: [documentOf("pem", PEM, ["home"])] }),
      /domain must be absent for the discovery mechanism pem/,
    );
    assert.doesNotThrow(() => new TelemetryClient("http://127.0.0.1:9", { policy, campaigns: [documentOf("pem", PEM, null)] }));
    assert.doesNotThrow(() => new TelemetryClient("http://127.0.0.1:9", { policy, campaigns: [documentOf("cms", CMS, ["home", "mail"])] }));
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { policy, campaigns: [documentOf("cms", CMS, [])] }),
      /must be absent or 1 to 10000 strings; got 0/,
    );
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { policy, campaigns: [documentOf("multi", MULTI, ["a"])] }),
      /domain must be absent for the multi-attribute mechanism multi/,
    );
  });
});

describe("a report spends the mechanism's own epsilon", () => {
  // sfp spends epsilon_word + epsilon_fragment = (1.53 - 0.3·1.53) + 0.3·1.53 = 1.5300000000000002
  // in floats (Python: SFP.privacy_epsilon), one ulp above the config's epsilon
  const mechanism = '{"epsilon":1.53,"fragment_blocks":9,"fragment_share":0.3,"hashes":4,"m":256,"max_length":8,"mechanism":"sfp","seed":0}';
  const content = `{"domain":null,"mechanism":${mechanism},"min_batch_size":100,"policy":null}`;
  const id = configId(JSON.parse(content)); // no integral float in it: JSON.parse keeps every number
  const document = `{"name":"ts-sfp","protocol":1,"mechanism":${mechanism},"domain":null,"policy":null,"min_batch_size":100,"config_id":"${id}"}`;

  test("sfp at the policy boundary: refused where Python refuses, accepted one ulp above", () => {
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [document], policy: new PrivacyPolicy({ max_epsilon: 1.53 }) }),
      /max_epsilon is 1\.5300000000000002 in the campaign/,
    );
    assert.doesNotThrow(
      () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [document], policy: new PrivacyPolicy({ max_epsilon: 1.5300000000000002 }) }),
    );
  });
});
