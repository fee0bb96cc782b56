/**
 * TelemetryClient with campaigns that need the device secret: memoized `grr` (longitudinal),
 * `rappor`, and `pem` (a per-campaign device choice). With the same device secret and words as
 * the Python client, the queued payloads, the ledger's memo keys and each report's charge are
 * Python's (test/fixtures/make_client_memo.py wrote test/fixtures/client-memo.json).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { configId, MemoryStorage, PrivacyPolicy, TelemetryClient } from "../src/index.js";
import { BudgetLedger } from "../src/ledger.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

interface MemoCase {
  document: string;
  device_secret: string;
  words_key: string;
  values: string[];
  payloads: unknown[];
  memo_keys: string[] | null;
  epsilon: number;
  epsilon_inf: number | null;
}

/** The fixture sits in test/fixtures/ (not copied by tsc): from dist/test/ go up to the package. */
function fixture(): MemoCase[] {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++) {
    try {
      return (JSON.parse(readFileSync(join(dir, "test", "fixtures", "client-memo.json"), "utf8")) as { cases: MemoCase[] }).cases;
    } catch {
      dir = dirname(dir);
    }
  }
  throw new Error("test/fixtures/client-memo.json not found");
}

const BUDGET = { epsilon_per_report: 4.0, reports_per_period: 20, period_seconds: 86400 };

/** A client whose storage holds `c.device_secret` as its device secret, with a new ledger sealed under it. */
async function clientWith(c: MemoCase): Promise<{ client: TelemetryClient; storage: MemoryStorage }> {
  const storage = new MemoryStorage();
  const ledger = new BudgetLedger(fromHex(c.device_secret), { ledger: null, head: null }, { expectExisting: false });
  await storage.set([["device_secret", c.device_secret], ...ledger.texts()]);
  const client = new TelemetryClient("http://127.0.0.1:9", {
    storage,
    campaigns: [c.document],
    policy: new PrivacyPolicy({ budget: BUDGET }),
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

describe("campaigns that need the device secret: the Python client's payloads", () => {
  for (const c of fixture()) {
    const name = (JSON.parse(c.document) as { name: string }).name;
    test(`${name}: payloads, memo keys and charges as Python's`, async () => {
      const { client, storage } = await clientWith(c);
      const ids = await client.recordMany(name, c.values);
      assert.equal(ids.length, c.values.length);
      assert.deepEqual(await queuedPayloads(storage), c.payloads);

      // the charges: a memoized value pays epsilon_inf at its first report and nothing later
      const seen = new Set<string>();
      const expected = c.values.map((_, i) => {
        const key = c.memo_keys?.[i];
        if (key === undefined) return c.epsilon;
        if (seen.has(key)) return 0;
        seen.add(key);
        return c.epsilon_inf as number;
      });
      const log = (await client.privacyLog(name)).filter((row) => row.report !== null);
      assert.deepEqual(
        log.map((row) => row.epsilon),
        expected,
      );
      const ledger = JSON.parse((await storage.get("ledger")) as string) as { rows: { memo_key?: string }[] };
      const stored = ledger.rows.map((row) => row.memo_key).filter((key) => key !== undefined);
      assert.deepEqual(stored, [...seen]);

      // a later report of an already-paid value costs nothing, and the ledger survives a restart
      if (c.memo_keys !== null) {
        await client.recordMany(name, [c.values[0]!]);
        const after = (await client.privacyLog(name)).filter((row) => row.report !== null);
        assert.equal(after.at(-1)?.epsilon, 0);
        const again = new TelemetryClient("http://127.0.0.1:9", { storage, campaigns: [c.document], policy: new PrivacyPolicy({ budget: BUDGET }) });
        assert.equal(await again.ledgerDamage(), null);
      }
    });
  }

  test("a memoized campaign whose epsilon_inf exceeds the app's max_epsilon_inf is refused", () => {
    const rappor = fixture().find((c) => c.document.includes('"rappor"'))!;
    assert.ok((rappor.epsilon_inf as number) > 5);
    assert.throws(
      () => new TelemetryClient("http://127.0.0.1:9", { campaigns: [rappor.document], policy: new PrivacyPolicy({ max_epsilon_inf: 5 }) }),
      /max_epsilon_inf/,
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
