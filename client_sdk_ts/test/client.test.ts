/**
 * TelemetryClient in Node: documents, policy, the sealed ledger, the outbox across restarts and
 * the upload rules against a local HTTP server. The mechanism is a small randomized response
 * written here (`mechanisms` option) so that these tests do not depend on the mechanism groups;
 * tests/client_sdk_ts/ runs the registry's mechanisms against a real collector.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, test } from "node:test";
import {
  BudgetExceededError,
  canonicalJson,
  configId,
  FolderStorage,
  HmacWordSource,
  IndexedDBStorage,
  MemoryStorage,
  parseCampaignDocument,
  PolicyViolation,
  PrivacyPolicy,
  pythonFloatRepr,
  type StateStorage,
  TelemetryClient,
} from "../src/index.js";
import type { Mechanism, MechanismConfig } from "../src/mechanisms/types.js";

/** k-ary randomized response on 64-bit words: keep with probability 1/2, else a uniform label. */
function testMechanism(config: MechanismConfig): Mechanism<number, number> {
  const k = BigInt(config.k as number);
  return {
    name: config.mechanism,
    perturb(values, options) {
      const rng = options?.rng ?? new HmacWordSource(new Uint8Array(16));
      return values.map((value) => {
        const [keep, other] = rng.words(2) as unknown as [bigint, bigint];
        return keep < 1n << 63n ? value : Number(other % k);
      });
    },
    toWire: (reports) => [...reports],
    valueKind: "category",
    largestWirePayload: () => Number(k) - 1,
  };
}

const LABELS = ["light", "dark", "system"];

/** A served campaign document (JSON text as Python writes it: floats with a fraction). */
function documentText(name: string, epsilon: string, policy?: string): string {
  const mechanism = `{"epsilon":${epsilon},"k":3,"mechanism":"grr"}`;
  const content = `{"domain":${JSON.stringify(LABELS)},"mechanism":${mechanism},"min_batch_size":100,"policy":${policy ?? "null"}}`;
  const id = createHash("sha256").update(content).digest("hex").slice(0, 32);
  return `{"name":"${name}","protocol":1,"mechanism":${mechanism},"domain":${JSON.stringify(LABELS)},"policy":${policy ?? "null"},"min_batch_size":100,"config_id":"${id}","created":"2026-12-04T00:00:00Z"}`;
}

const BUDGET = '{"epsilon_per_report":1.0,"period_seconds":86400,"reports_per_period":3}';
const directories: string[] = [];
function stateDir(): string {
  const directory = mkdtempSync(join(tmpdir(), "ldp-ts-client-"));
  directories.push(directory);
  return directory;
}
afterEach(() => {
  while (directories.length) rmSync(directories.pop() as string, { recursive: true, force: true });
});

function client(options: { storage?: StateStorage; campaigns?: string[]; policy?: PrivacyPolicy; baseUrl?: string; retries?: number } = {}): TelemetryClient {
  return new TelemetryClient(options.baseUrl ?? "http://127.0.0.1:9", {
    storage: options.storage ?? new MemoryStorage(),
    campaigns: options.campaigns ?? [documentText("theme", "1.0", BUDGET)],
    policy: options.policy,
    mechanisms: testMechanism,
    rng: new HmacWordSource(new Uint8Array(32).fill(7)),
    retries: options.retries ?? 2,
  });
}

describe("canonical JSON and config_id", () => {
  test("floats are written as Python's repr writes them", () => {
    const cases: [number, string][] = [
      [1, "1.0"], [0.1, "0.1"], [1e-6, "1e-06"], [1e-5, "1e-05"], [0.0001, "0.0001"], [1e16, "1e+16"],
      [1234567890123456, "1234567890123456.0"], [-2.5, "-2.5"], [123.456, "123.456"], [1.5e300, "1.5e+300"], [5e-324, "5e-324"],
    ];
    for (const [value, text] of cases) assert.equal(pythonFloatRepr(value), text, `repr of ${value}`);
  });

  test("a served document keeps 1.0 apart from 1, so its config_id verifies", () => {
    const text = documentText("theme", "1.0");
    const document = parseCampaignDocument(text);
    assert.equal(document.configId, JSON.parse(text).config_id);
    assert.equal(canonicalJson({ b: [1, "é"], a: null }), '{"a":null,"b":[1,"é"]}');
    // The same document through JSON.parse writes "epsilon":1 and fails, saying why.
    assert.throws(() => parseCampaignDocument(JSON.parse(text) as object), /config_id does not match.*pass its JSON text/);
    assert.equal(configId({ a: 1 }).length, 32);
  });

  test("bad documents are refused naming the field", () => {
    const text = documentText("theme", "1.0");
    assert.throws(() => parseCampaignDocument(text.replace('"protocol":1', '"protocol":2')), /protocol must be 1.*got a number/);
    assert.throws(() => parseCampaignDocument(text.replace('"k":3', '"k":4')), /config_id does not match/);
    assert.throws(() => parseCampaignDocument(text.replace('"name":"theme"', '"name":"bad name"')), /name must be.*got a string of 8 characters/);
    assert.throws(() => parseCampaignDocument(text.replace('"min_batch_size":100', '"min_batch_size":"x"')), /min_batch_size must be an integer.*got a string/);
    assert.throws(() => parseCampaignDocument(" ".repeat(1 << 20) + text), /larger than 1048576 bytes/);
    assert.throws(() => client({ campaigns: [text.replace('"protocol":1', '"protocol":"1"')] }), /campaigns\[0\]: protocol must be 1/);
  });
});

describe("record", () => {
  test("an unknown label or a wrong type names the value's type, never the value", async () => {
    const c = client();
    await assert.rejects(c.record("theme", "secret-label"), (error: Error) => {
      assert.match(error.message, /a string of 12 characters/);
      assert.doesNotMatch(error.message, /secret-label/);
      return true;
    });
    await assert.rejects(c.record("theme", 3), /position 0 \(a number\) is not a label/);
    assert.equal(await c.pending(), 0);
  });

  test("the app's policy refuses a weaker campaign before anything is randomized", async () => {
    assert.throws(
      () => client({ campaigns: [documentText("theme", "6.0")], policy: new PrivacyPolicy({ max_epsilon: 2 }) }),
      (error: Error) => error instanceof PolicyViolation && /max_epsilon is 6 in the campaign, the policy allows 2/.test(error.message),
    );
    const loose = client({ campaigns: [documentText("theme", "2.0")], policy: new PrivacyPolicy({ max_epsilon: 2 }) });
    assert.ok(await loose.record("theme", "dark"));
    assert.throws(() => new PrivacyPolicy({ allowed_mechanisms: ["GRR"] }), /allowed_mechanisms: unknown mechanism name\(s\) "GRR"/);
  });

  test("the budget: three reports a period, the fourth refused and not queued", async () => {
    const c = client();
    for (let i = 0; i < 3; i++) assert.match((await c.record("theme", "dark")) ?? "", /^[0-9a-f]{32}$/);
    await assert.rejects(c.record("theme", "dark"), BudgetExceededError);
    assert.equal(await c.pending("theme"), 3);
    const log = await c.privacyLog("theme");
    assert.equal(log.filter((entry) => entry.event === null).length, 3);
  });

  test("an unavailable campaign drops the value, counts it, and never throws", async () => {
    const c = client({ campaigns: [] });
    assert.equal(await c.record("nowhere", "dark"), null);
    const status = c.status();
    assert.deepEqual(status.dropped, { nowhere: { "campaign-unavailable": 1 } });
    assert.equal(status.last_error?.type, "UploadError");
  });

  test("refuses to run without crypto.getRandomValues", () => {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, "crypto");
    Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true });
    try {
      assert.throws(() => client(), /needs crypto.getRandomValues/);
    } finally {
      Object.defineProperty(globalThis, "crypto", descriptor as PropertyDescriptor);
    }
  });

  test("an insecure origin is refused", () => {
    assert.throws(() => client({ baseUrl: "http://collector.example" }), /plain http to a host that is not loopback/);
  });

  test("storage that fails: the client keeps working in memory and says so", async () => {
    const broken: StateStorage = {
      kind: "broken",
      get: async () => null,
      set: async () => {
        throw new DOMException("quota", "QuotaExceededError");
      },
    };
    const c = client({ storage: broken });
    assert.ok(await c.record("theme", "dark"));
    const { storage } = c.status();
    assert.equal(storage.persistent, false);
    assert.match(storage.error ?? "", /QuotaExceededError.*in memory only/);
    assert.equal(await c.pending(), 1);
  });

  test("IndexedDB missing (Node here): the client works in memory and says storage is unavailable", async () => {
    const c = client({ storage: new IndexedDBStorage("absent") });
    assert.ok(await c.record("theme", "dark"));
    assert.equal(await c.pending(), 1);
    assert.match(c.status().storage.error ?? "", /storage indexeddb:absent is unavailable/);
  });

  test("an unreadable outbox segment: the client starts, keeps the rest and says so", async () => {
    const directory = stateDir();
    const first = client({ storage: new FolderStorage(directory) });
    await first.record("theme", "dark");
    await first.record("theme", "light");
    writeFileSync(join(directory, "outbox_1.json"), "{not json");
    const again = client({ storage: new FolderStorage(directory) });
    assert.equal(await again.pending(), 1);
    assert.match(again.status().storage.error ?? "", /unreadable outbox/);
  });
});

describe("the sealed ledger", () => {
  async function spendTwo(directory: string): Promise<void> {
    const c = client({ storage: new FolderStorage(directory) });
    await c.record("theme", "dark");
    await c.record("theme", "light");
  }

  test("an intact ledger keeps its spends across a restart", async () => {
    const directory = stateDir();
    await spendTwo(directory);
    const again = client({ storage: new FolderStorage(directory) });
    assert.equal(await again.ledgerDamage(), null);
    assert.ok(await again.record("theme", "dark"));
    await assert.rejects(again.record("theme", "dark"), /3 of 3 charged reports already sent/);
  });

  for (const [what, damage, reason] of [
    ["an edited row", (d: string) => writeFileSync(join(d, "ledger.json"), readFileSync(join(d, "ledger.json"), "utf8").replace('"epsilon":1', '"epsilon":0')), /spend row 1 fails verification/],
    ["a deleted ledger", (d: string) => { rmSync(join(d, "ledger.json")); rmSync(join(d, "ledger_head.json")); }, /the ledger is missing/],
    ["an emptied ledger", (d: string) => writeFileSync(join(d, "ledger.json"), ""), /missing or empty/],
  ] as const) {
    test(`${what} never grants budget: the device is locked out for the period`, async () => {
      const directory = stateDir();
      await spendTwo(directory);
      damage(directory);
      const again = client({ storage: new FolderStorage(directory) });
      assert.match((await again.ledgerDamage()) ?? "", reason);
      await assert.rejects(again.record("theme", "dark"), (error: Error) => error instanceof BudgetExceededError && /found damaged/.test(error.message));
      assert.equal(await again.pending(), 2);
    });
  }

  test("a ledger rolled back to an older copy is behind its head copy: locked out", async () => {
    const directory = stateDir();
    const c = client({ storage: new FolderStorage(directory) });
    await c.record("theme", "dark");
    const older = readFileSync(join(directory, "ledger.json"), "utf8");
    await c.record("theme", "light");
    writeFileSync(join(directory, "ledger.json"), older);
    const again = client({ storage: new FolderStorage(directory) });
    assert.match((await again.ledgerDamage()) ?? "", /fewer than the \d+ its head copy recorded|clock is behind/);
    await assert.rejects(again.record("theme", "dark"), BudgetExceededError);
  });
});

/** A collector stand-in: stores report ids once, answers as scripted first. */
type Step = (request: IncomingMessage, response: ServerResponse, body: string, stored: Set<string>) => boolean;
async function server(script: Step[]) {
  const stored = new Set<string>();
  let requests = 0;
  const http = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      requests += 1;
      const step = script.shift();
      if (step !== undefined && step(request, response, body, stored)) return;
      const upload = JSON.parse(body) as { reports: { id: string }[] };
      let accepted = 0;
      for (const report of upload.reports) if (!stored.has(report.id)) { stored.add(report.id); accepted += 1; }
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ accepted, duplicate: upload.reports.length - accepted, rejected: [] }));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return { url, stored, requests: () => requests, close: () => new Promise((resolve) => http.close(resolve)) };
}

const answer = (status: number, headers: Record<string, string> = {}) => (_: IncomingMessage, response: ServerResponse) => {
  response.writeHead(status, { "Content-Type": "application/problem+json", ...headers });
  response.end(JSON.stringify({ type: "urn:ldp-telemetry:problem:x", title: "x", status, detail: "scripted" }));
  return true;
};

describe("flush", () => {
  test("the outbox survives a restart and uploads once", async () => {
    const directory = stateDir();
    const collector = await server([]);
    try {
      const first = client({ storage: new FolderStorage(directory), baseUrl: collector.url });
      await first.record("theme", "dark");
      await first.record("theme", "system");
      const kept = readdirSync(directory).filter((f) => f.startsWith("outbox") || f.startsWith("ledger"));
      assert.ok(kept.includes("outbox_0.json") && kept.includes("outbox_1.json"), kept.join());
      const stored = kept.map((f) => readFileSync(join(directory, f), "utf8")).join("");
      assert.doesNotMatch(stored, /dark|system/); // labels never stored: only reports
      const second = client({ storage: new FolderStorage(directory), baseUrl: collector.url });
      assert.equal(await second.pending(), 2);
      assert.equal(await second.flush(), 2);
      assert.equal(collector.stored.size, 2);
      assert.equal(await client({ storage: new FolderStorage(directory), baseUrl: collector.url }).pending(), 0);
      assert.deepEqual(readdirSync(directory).filter((f) => f.startsWith("outbox_")), [], "acknowledged segments are deleted");
    } finally {
      await collector.close();
    }
  });

  test("503 with Retry-After and 408 are retried within the flush", async () => {
    const collector = await server([answer(503, { "Retry-After": "1" }), answer(408)]);
    try {
      const c = client({ baseUrl: collector.url });
      await c.record("theme", "dark");
      const started = Date.now();
      assert.equal(await c.flush(), 1);
      assert.ok(Date.now() - started >= 1000, "Retry-After: 1 was honoured");
      assert.equal(collector.requests(), 3);
      assert.equal(c.status().consecutive_failures, 0);
    } finally {
      await collector.close();
    }
  });

  test("a 4xx other than 408/429 is not retried: the reports stay queued and status says why", async () => {
    const collector = await server([answer(400)]);
    try {
      const c = client({ baseUrl: collector.url });
      await c.record("theme", "dark");
      assert.equal(await c.flush(), 0);
      assert.equal(collector.requests(), 1);
      assert.equal(await c.pending(), 1);
      const status = c.status();
      assert.equal(status.last_error?.status, 400);
      assert.match(status.last_error?.message ?? "", /HTTP 400: scripted/);
      assert.ok((status.next_attempt ?? 0) > Date.now() / 1000, "a backoff is scheduled");
      assert.equal(await c.flush(), 0, "before next_attempt a flush waits");
      assert.equal(collector.requests(), 1);
      assert.equal(await c.flush({ force: true }), 1);
    } finally {
      await collector.close();
    }
  });

  test("429 past the retries: the backoff keeps at least Retry-After", async () => {
    const collector = await server([answer(429, { "Retry-After": "0" }), answer(429, { "Retry-After": "600" })]);
    try {
      const c = client({ baseUrl: collector.url, retries: 1 });
      await c.record("theme", "dark");
      assert.equal(await c.flush({ deadline: 5 }), 0);
      const next = c.status().next_attempt ?? 0;
      assert.ok(next >= Date.now() / 1000 + 599, `next attempt ${next} honours Retry-After 600`);
    } finally {
      await collector.close();
    }
  });

  test("a lost response: the retry is a duplicate, never a second report", async () => {
    const collector = await server([
      (request, _response, body, stored) => {
        // Store the batch, then drop the connection before answering.
        for (const report of (JSON.parse(body) as { reports: { id: string }[] }).reports) stored.add(report.id);
        request.socket.destroy();
        return true;
      },
    ]);
    try {
      const c = client({ baseUrl: collector.url });
      await c.record("theme", "dark");
      await c.record("theme", "light");
      assert.equal(await c.flush(), 2, "the retry is acknowledged (as duplicates)");
      assert.equal(collector.stored.size, 2);
      assert.equal(collector.requests(), 2);
      assert.equal(await c.pending(), 0);
    } finally {
      await collector.close();
    }
  });

  test("network down: flush resolves 0 and never throws", async () => {
    const c = client({ baseUrl: "http://127.0.0.1:9", retries: 0 });
    await c.record("theme", "dark");
    assert.equal(await c.flush(), 0);
    assert.equal(c.status().last_error?.type, "UploadError");
    assert.equal(await c.pending(), 1);
  });

  test("pagehide: a keepalive flush within the 64 KiB budget", async () => {
    const bodies: { body: string; keepalive: boolean | undefined }[] = [];
    const fake = (async (_url: string, init?: RequestInit) => {
      bodies.push({ body: String(init?.body), keepalive: init?.keepalive });
      return new Response("{}", { status: 200 });
    }) as typeof fetch;
    const c = new TelemetryClient("http://127.0.0.1:9", {
      campaigns: [documentText("theme", "1.0")],
      mechanisms: testMechanism,
      fetch: fake,
    });
    for (let i = 0; i < 2000; i++) await c.record("theme", "dark");
    const sent = c.flushOnExit();
    assert.ok(sent > 100 && sent < 2000, `${sent} of 2000 fit`);
    assert.equal(bodies.length, 1);
    assert.equal(bodies[0]?.keepalive, true);
    assert.ok(Buffer.byteLength(bodies[0]?.body ?? "") <= 64 * 1024);
    assert.equal(await c.pending(), 2000, "they stay queued until acknowledged");
  });
});

describe("shuffled campaigns", () => {
  const sealed = JSON.parse(readFileSync(new URL("../../../conformance/sealed.json", import.meta.url), "utf8")) as { public_key: string; key_id: string };
  const shuffle = '{"central_epsilon":1.0,"delta":1e-08,"min_batch":1000}';
  function shuffledText(): string {
    const mechanism = '{"epsilon":1.0,"k":3,"mechanism":"grr"}';
    const content = `{"domain":${JSON.stringify(LABELS)},"mechanism":${mechanism},"min_batch_size":100,"policy":null,"shuffle":${shuffle}}`;
    const id = createHash("sha256").update(content).digest("hex").slice(0, 32);
    const key = `{"key_id":"${sealed.key_id}","key":"${sealed.public_key}"}`;
    return `{"name":"hidden","protocol":1,"mechanism":${mechanism},"domain":${JSON.stringify(LABELS)},"policy":null,"min_batch_size":100,"shuffle":${shuffle},"public_key":${key},"config_id":"${id}"}`;
  }
  const bounded = (config: MechanismConfig) => ({ ...testMechanism(config), largestWirePayload: () => 2 });

  test("reports are sealed, all of one size, and go to the shuffler only, with its token", async () => {
    const authorizations: (string | undefined)[] = [];
    const shuffler = await server([
      (request) => {
        authorizations.push(request.headers.authorization);
        return false;
      },
    ]);
    try {
      const c = new TelemetryClient("http://127.0.0.1:9", {
        campaigns: [shuffledText()],
        mechanisms: bounded,
        shufflerUrl: shuffler.url,
        shufflerToken: "install-token-1",
      });
      for (const label of LABELS) await c.record("hidden", label);
      assert.equal(await c.flush(), 3);
      assert.deepEqual(authorizations, ["Bearer install-token-1"]);
    } finally {
      await shuffler.close();
    }
  });

  test("the queue holds only envelopes of one length; without a shuffler nothing goes to the collector", async () => {
    const storage = new MemoryStorage();
    const c = new TelemetryClient("http://127.0.0.1:9", { storage, campaigns: [shuffledText()], mechanisms: bounded, retries: 0 });
    await c.record("hidden", "light");
    await c.record("hidden", "system");
    const queued = [JSON.parse((await storage.get("outbox_0")) as string)[0], JSON.parse((await storage.get("outbox_1")) as string)[0]];
    for (const q of queued) assert.deepEqual(Object.keys(q.payload).sort(), ["key_id", "sealed"]);
    assert.equal(queued[0].payload.sealed.length, queued[1].payload.sealed.length);
    assert.equal(await c.flush(), 0);
    assert.match(c.status().last_error?.message ?? "", /shuffled: give TelemetryClient a shufflerUrl/);
  });

  test("a mechanism that does not bound its payloads cannot be sealed: refused naming it", () => {
    assert.throws(
      () =>
        new TelemetryClient("http://127.0.0.1:9", {
          campaigns: [shuffledText()],
          // an app's own factory whose mechanism states no bound (JavaScript callers are not type-checked)
          mechanisms: (config) => ({ ...testMechanism(config), largestWirePayload: undefined }) as unknown as Mechanism,
        }),
      /mechanism "grr" does not bound its wire payloads/,
    );
  });
});

describe("campaign changes", () => {
  test("a changed campaign is refused until the app accepts it; reports of the old config are dropped", async () => {
    let served = documentText("theme", "1.0");
    let stored = 0;
    const http = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString()));
      request.on("end", () => {
        const current = (JSON.parse(served) as { config_id: string }).config_id;
        if (request.method === "GET") {
          response.writeHead(200, { "Content-Type": "application/json" }).end(served);
          return;
        }
        const upload = JSON.parse(body) as { config_id: string; reports: unknown[] };
        if (upload.config_id !== current) {
          response.writeHead(409, { "Content-Type": "application/problem+json" });
          response.end(JSON.stringify({ type: "urn:ldp-telemetry:problem:stale-config", status: 409, detail: "stale" }));
          return;
        }
        stored += upload.reports.length;
        response.writeHead(200, { "Content-Type": "application/json" });
        response.end(JSON.stringify({ accepted: upload.reports.length, duplicate: 0, rejected: [] }));
      });
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    try {
      const c = new TelemetryClient(url, { mechanisms: testMechanism, rng: new HmacWordSource(new Uint8Array(16)), retries: 0 });
      assert.ok(await c.record("theme", "dark"), "the first served config is accepted");
      served = documentText("theme", "3.0");
      assert.equal(await c.flush(), 0, "stale: the refetched config differs, and is not swapped in");
      const accepted = JSON.parse(documentText("theme", "1.0")).config_id as string;
      const now = JSON.parse(served).config_id as string;
      assert.deepEqual(c.status().changed_campaigns, { theme: { accepted, served: now } });
      assert.equal(await c.record("theme", "dark"), null);
      assert.deepEqual(c.status().dropped, { theme: { "campaign-changed": 1 } });
      assert.equal(await c.pending(), 1);
      await c.acceptCampaignChange("theme");
      assert.ok(await c.record("theme", "light"));
      assert.equal(await c.flush({ force: true }), 1, "only the report made under the accepted config");
      assert.equal(stored, 1);
      assert.equal(await c.pending(), 0);
      const log = await c.privacyLog("theme");
      assert.ok(log.some((entry) => /campaign changed/.test(entry.event ?? "")));
      assert.ok(log.some((entry) => /change accepted/.test(entry.event ?? "")));
    } finally {
      await new Promise((resolve) => http.close(resolve));
    }
  });
});
