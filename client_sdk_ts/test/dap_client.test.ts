/**
 * TelemetryClient with secure-aggregation campaigns (docs/dap.md, "The device"), offline: the
 * documents of conformance/dap_campaigns.json pinned, a Leader played by an injected `fetch`.
 * What is queued (only the encoded Report, under its DAP report id), what the ledger charges,
 * where and how the upload goes, and how the Leader's answers settle the outbox.
 * tests/client_sdk_ts/test_node_dap.py runs the same client against a real Leader and Helper.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, test } from "node:test";

import { canonicalJson, configId, type JsonValue, parseJson } from "../src/config.js";
import { b64decode } from "../src/dap/campaign.js";
import { dapEntry, REPORT_ERRORS } from "../src/dap/driver.js";
import { BudgetExceededError, FolderStorage, HmacWordSource, MemoryStorage, mechanismFromConfig, PolicyViolation, PrivacyPolicy, TelemetryClient } from "../src/index.js";

const FILE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "conformance", "dap_campaigns.json");
const DATA = parseJson(readFileSync(FILE, "utf-8")) as { documents: { document: Record<string, JsonValue>; valid: boolean }[] };
const [THEME, OPTED_IN] = DATA.documents.filter((d) => d.valid).map((d) => d.document) as [Record<string, JsonValue>, Record<string, JsonValue>];
const LEADER = "https://leader.example/dap/";
const HELPER = "https://helper.example/dap/";
const KEYS = { leader: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", helper: "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8" };
const TRUSTING = new PrivacyPolicy({ trusted_aggregators: { [LEADER]: KEYS.leader, [HELPER]: KEYS.helper }, max_central_epsilon: 1.0 });
const UPLOAD_URL = `${LEADER}tasks/${String((THEME.dap as Record<string, JsonValue>).task_id)}/reports`;

/** A document edited, with its config_id recomputed (docs/dap.md: over {dap, local, domain, policy}). */
function edited(document: Record<string, JsonValue>, edit: (d: Record<string, JsonValue>) => void): string {
  const copy = parseJson(canonicalJson(document)) as Record<string, JsonValue>;
  edit(copy);
  copy.config_id = configId({ dap: copy.dap, local: copy.local ?? null, domain: copy.domain ?? null, policy: copy.policy ?? null });
  return canonicalJson(copy);
}

interface Posted {
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
  keepalive: boolean | undefined;
}

/** A Leader: answers each POST with the next of `answers` (status, body), recording the requests. */
function leader(answers: ((posted: Posted) => Response)[]): { fetch: typeof fetch; posted: Posted[] } {
  const posted: Posted[] = [];
  const fake = async (url: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const body = init?.body instanceof Uint8Array ? init.body : new TextEncoder().encode(String(init?.body ?? ""));
    const request = { url: String(url), headers: { ...(init?.headers as Record<string, string>) }, body, keepalive: init?.keepalive };
    posted.push(request);
    const answer = answers.shift();
    if (answer === undefined) throw new Error("the test Leader has no more answers");
    return answer(request);
  };
  return { fetch: fake as typeof fetch, posted };
}

const ok = (): Response => new Response(new Uint8Array(0), { status: 200, headers: { "Content-Type": "application/ppm-dap;message=upload-errors" } });

/** An `UploadErrors` body: each (report id, error name). */
function uploadErrors(statuses: [string, string][]): Response {
  const body = new Uint8Array(17 * statuses.length);
  statuses.forEach(([id, error], i) => {
    body.set(Uint8Array.from(id.match(/../g) as string[], (h) => parseInt(h, 16)), 17 * i);
    body[17 * i + 16] = REPORT_ERRORS.indexOf(error);
  });
  return new Response(body, { status: 200, headers: { "Content-Type": "application/ppm-dap;message=upload-errors" } });
}

const directories: string[] = [];
afterEach(() => {
  while (directories.length) rmSync(directories.pop() as string, { recursive: true, force: true });
});

function client(options: { fetch: typeof fetch; campaigns?: string[]; policy?: PrivacyPolicy; storage?: FolderStorage | MemoryStorage; batchSize?: number }): TelemetryClient {
  return new TelemetryClient("https://collector.example", {
    storage: options.storage ?? new MemoryStorage(),
    campaigns: options.campaigns ?? [canonicalJson(THEME)],
    policy: options.policy ?? TRUSTING,
    rng: new HmacWordSource(new Uint8Array(32).fill(9)),
    fetch: options.fetch,
    retries: 2,
    batchSize: options.batchSize,
    flushOnPagehide: false,
  });
}

test("record queues only the sealed Report under its DAP report id; flush posts one UploadRequest to the Leader", async () => {
  const directory = mkdtempSync(join(tmpdir(), "ldp-ts-dap-"));
  directories.push(directory);
  const { fetch, posted } = leader([ok]);
  const device = client({ fetch, storage: new FolderStorage(directory) });
  const ids = [await device.record("theme", "dark"), await device.record("theme", "system"), ...(await device.recordMany("theme", ["light"]))];
  assert.equal(ids.length, 3);
  assert.ok(ids.every((id) => typeof id === "string" && /^[0-9a-f]{32}$/.test(id)));
  assert.deepEqual(device.status().queued, { theme: 3 });
  // the device's files hold no label, and each queued payload is a Report whose id is the queue's id
  const stored = readdirSync(directory).map((f) => readFileSync(join(directory, f), "utf-8")).join("\n");
  for (const label of ["light", "dark", "system"]) assert.ok(!stored.includes(`"${label}"`), `${label} stored`);
  const queued = readdirSync(directory)
    .filter((f) => /^outbox_\d+\.json$/.test(f))
    .flatMap((f) => JSON.parse(readFileSync(join(directory, f), "utf-8")) as { id: string; payload: string }[]);
  const reports = queued.map((q) => b64decode(q.payload, "payload"));
  assert.deepEqual(
    reports.map((r) => Array.from(r.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("")),
    queued.map((q) => q.id),
  );
  // each report charged min(local 2, central 1) = 1 epsilon
  const log = await device.privacyLog("theme");
  assert.deepEqual(log.map((row) => row.epsilon), [1, 1, 1]);
  assert.deepEqual(log.map((row) => row.report), ids.map((id) => ({ dap_report: id })));

  assert.equal(await device.flush(), 3);
  assert.equal(posted.length, 1);
  const [request] = posted as [Posted];
  assert.equal(request.url, UPLOAD_URL);
  assert.equal(request.headers["Content-Type"], "application/ppm-dap;message=upload-req");
  const expected = new Uint8Array(reports.reduce((n, r) => n + r.length, 0));
  reports.reduce((at, r) => (expected.set(r, at), at + r.length), 0);
  assert.deepEqual(request.body, expected);
  assert.equal(await device.pending(), 0);
  assert.equal(device.status().last_error, null);
});

test("the campaign's budget holds: the fifth report in a period is refused and nothing more is queued", async () => {
  const device = client({ fetch: leader([]).fetch });
  await device.recordMany("theme", ["dark", "dark", "dark", "dark"]);
  await assert.rejects(device.record("theme", "dark"), BudgetExceededError);
  assert.equal(await device.pending("theme"), 4);
});

test("the Leader's UploadErrors: replayed is delivered, too early kept, any other dropped and counted", async () => {
  const answers = [(p: Posted): Response => {
    const size = p.body.length / 4; // four reports of one size (a histogram's)
    const ids = [0, 1, 2].map((i) => Array.from(p.body.subarray(i * size, i * size + 16), (b) => b.toString(16).padStart(2, "0")).join(""));
    return uploadErrors([
      [ids[0] as string, "report_replayed"],
      [ids[1] as string, "report_too_early"],
      [ids[2] as string, "batch_collected"],
    ]);
  }];
  const { fetch, posted } = leader(answers);
  const device = client({ fetch });
  const ids = await device.recordMany("theme", ["dark", "light", "system", "dark"]);
  assert.equal(await device.flush(), 2); // the unlisted one and the replayed one
  assert.equal(posted.length, 1);
  assert.equal(await device.pending("theme"), 1);
  assert.deepEqual(device.status().dropped, { theme: { "dap:batch_collected": 1 } });
  assert.ok(ids.length === 4);
});

test("5xx is retried; a 4xx is not, its reports stay queued and status() names the Leader's problem", async () => {
  const problem = (): Response =>
    new Response(JSON.stringify({ type: "urn:ietf:params:ppm:dap:error:unrecognizedTask", title: "unknown task", detail: "no such task", status: 400 }), {
      status: 400,
      headers: { "Content-Type": "application/problem+json" },
    });
  const { fetch, posted } = leader([() => new Response("busy", { status: 503 }), ok, problem]);
  const device = client({ fetch });
  await device.recordMany("theme", ["dark", "light"]);
  assert.equal(await device.flush(), 2);
  assert.equal(posted.length, 2); // the 503, then the retry
  await device.record("theme", "dark");
  assert.equal(await device.flush(), 0);
  assert.equal(posted.length, 3); // no retry of the 400
  assert.equal(await device.pending("theme"), 1);
  const error = device.status().last_error;
  assert.equal(error?.status, 400);
  assert.match(error?.message ?? "", /refused: HTTP 400: no such task/);
});

test("a 413 halves the batch", async () => {
  const tooLarge = (): Response => new Response("", { status: 413 });
  const { fetch, posted } = leader([tooLarge, ok, ok]);
  const device = client({ fetch, batchSize: 4 });
  await device.recordMany("theme", ["dark", "light", "system", "dark"]);
  assert.equal(await device.flush(), 4);
  assert.deepEqual(
    posted.map((p) => p.body.length / (posted[0] as Posted).body.length),
    [1, 0.5, 0.5],
  );
});

test("the app's policy is checked before anything is sharded: untrusted Aggregators, a wrong key", async () => {
  // default policy: no trusted Aggregator, so no secure aggregation
  const refused = new TelemetryClient("https://collector.example", { campaigns: [canonicalJson(THEME)], fetch: leader([]).fetch, flushOnPagehide: false });
  await assert.rejects(refused.record("theme", "dark"), (e: Error) => e instanceof PolicyViolation && e.field === "trusted_aggregators");
  const wrongKey = new PrivacyPolicy({ trusted_aggregators: { [LEADER]: KEYS.leader, [HELPER]: KEYS.leader.replace("A", "B") } });
  const device = client({ fetch: leader([]).fetch, policy: wrongKey });
  await assert.rejects(device.record("theme", "dark"), (e: Error) => e instanceof PolicyViolation && /helper .*HPKE public key is not the trusted one/.test(e.message));
});

test("a served document is verified and checked like a pinned one; a plain-http Leader not on loopback is refused", async () => {
  const insecure = edited(THEME, (d) => {
    (d.dap as Record<string, JsonValue>).leader = "http://leader.example/dap/";
  });
  const policy = new PrivacyPolicy({ trusted_aggregators: { "http://leader.example/dap/": KEYS.leader, [HELPER]: KEYS.helper } });
  const serve = (): Response => new Response(insecure, { status: 200, headers: { "Content-Type": "application/json" } });
  const device = new TelemetryClient("https://collector.example", { policy, fetch: leader([serve]).fetch, flushOnPagehide: false });
  assert.equal(await device.record("theme", "dark"), null);
  assert.deepEqual(device.status().dropped, { theme: { "campaign-unverifiable": 1 } });
  assert.match(device.status().last_error?.message ?? "", /the Leader's URL is plain http to a host that is not loopback/);
});

test("count and sum campaigns: the value's type is checked naming its position; sums are clipped and counted", async () => {
  const sum = edited(OPTED_IN, (d) => {
    d.name = "minutes";
    (d.dap as Record<string, JsonValue>).vdaf = { type: "sum", max_measurement: 1440 };
  });
  const policy = new PrivacyPolicy({
    trusted_aggregators: { [LEADER]: KEYS.leader, [HELPER]: KEYS.helper },
    max_central_epsilon: 1.0,
    budget: { epsilon_per_report: 1.0, reports_per_period: 100, period_seconds: 86400 },
  });
  const device = client({ fetch: leader([ok]).fetch, campaigns: [canonicalJson(OPTED_IN), sum], policy });
  await device.recordMany("opted-in", [true, false, 1]);
  await assert.rejects(device.record("opted-in", 2), /position 0 \(a number\) of campaign "opted-in" must be true or false/);
  await assert.rejects(device.record("opted-in", "yes"), (e: Error) => /a string of 3 characters/.test(e.message) && !e.message.includes("yes"));
  await device.recordMany("minutes", [30, 2000, -5]);
  assert.deepEqual(device.status().clipped, { minutes: 2 });
  assert.deepEqual(device.status().queued, { "opted-in": 3, minutes: 3 });
  // each charged the central epsilon 0.5 (no local)
  assert.deepEqual((await device.privacyLog("minutes")).map((row) => row.epsilon), [0.5, 0.5, 0.5]);
});

test("only a document with a \"dap\" key is read as a secure-aggregation campaign", () => {
  // a label or a metadata text mentioning "dap" is not one; null is refused as before, by type
  const regular = `{"name":"notes","protocol":1,"mechanism":{"epsilon":1.0,"k":2,"mechanism":"grr"},"domain":["dap","\\"dap\\": no"],"policy":null,"min_batch_size":100,"config_id":"0"}`;
  assert.throws(() => client({ fetch: leader([]).fetch, campaigns: [regular] }), /campaigns\[0\]: campaign notes: config_id does not match its content/);
  assert.throws(() => client({ fetch: leader([]).fetch, campaigns: [null as unknown as string] }), /campaigns\[0\]: a campaign document must be a JSON object; got null/);
});

/** The queued reports of a device's state folder, in the outbox's order. */
function queuedIn(directory: string): { id: string; payload: string; campaign: string }[] {
  return readdirSync(directory)
    .filter((f) => /^outbox_\d+\.json$/.test(f))
    .sort((a, b) => Number(a.slice(7, -5)) - Number(b.slice(7, -5)))
    .flatMap((f) => JSON.parse(readFileSync(join(directory, f), "utf-8")) as { id: string; payload: string; campaign: string }[]);
}

function concatenated(reports: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(reports.reduce((n, r) => n + r.length, 0));
  reports.reduce((at, r) => (out.set(r, at), at + r.length), 0);
  return out;
}

test("pagehide: the keepalive flush sends the queued Reports to the Leader; the next flush counts them once", async () => {
  const directory = mkdtempSync(join(tmpdir(), "ldp-ts-dap-"));
  directories.push(directory);
  const replayed = (p: Posted): Response => {
    const size = p.body.length / 4;
    const ids = [0, 1, 2, 3].map((i) => Array.from(p.body.subarray(i * size, i * size + 16), (b) => b.toString(16).padStart(2, "0")).join(""));
    return uploadErrors(ids.map((id) => [id, "report_replayed"]));
  };
  const { fetch, posted } = leader([ok, replayed]);
  const device = client({ fetch, storage: new FolderStorage(directory) });
  await device.recordMany("theme", ["dark", "light", "system", "dark"]);
  const reports = queuedIn(directory).map((q) => b64decode(q.payload, "payload"));
  assert.equal(device.flushOnExit(), 4);
  assert.equal(posted.length, 1);
  const [request] = posted as [Posted];
  assert.equal(request.url, UPLOAD_URL);
  assert.equal(request.keepalive, true);
  assert.equal(request.headers["Content-Type"], "application/ppm-dap;message=upload-req");
  assert.deepEqual(request.body, concatenated(reports));
  assert.equal(await device.pending(), 4, "they stay queued: the keepalive answer is never read");
  // the next page's flush sends them again; the Leader's report_replayed counts them delivered
  assert.equal(await device.flush(), 4);
  assert.equal(posted.length, 2);
  assert.equal(await device.pending(), 0);
  assert.deepEqual(device.status().dropped, {});
});

test("pagehide: the Reports that fit in the keepalive budget, shared with the collector's campaigns", async () => {
  const directory = mkdtempSync(join(tmpdir(), "ldp-ts-dap-"));
  directories.push(directory);
  const { fetch, posted } = leader(Array.from({ length: 3 }, () => ok));
  const labels = ["a", "b", "c"];
  const mechanism = '{"epsilon":1.0,"k":3,"mechanism":"grr"}';
  const content = `{"domain":${JSON.stringify(labels)},"mechanism":${mechanism},"min_batch_size":100,"policy":null}`;
  const id = createHash("sha256").update(content).digest("hex").slice(0, 32);
  const local = `{"name":"local","protocol":1,"mechanism":${mechanism},"domain":${JSON.stringify(labels)},"policy":null,"min_batch_size":100,"config_id":"${id}","created":"2026-12-04T00:00:00Z"}`;
  const device = client({ fetch, storage: new FolderStorage(directory), campaigns: [canonicalJson(THEME), local] });
  await device.recordMany("theme", ["dark", "light", "system", "dark"]);
  await device.recordMany("local", Array.from({ length: 2000 }, (_, i) => labels[i % 3] as string));
  const sent = device.flushOnExit();
  // the Leader's request first (the outbox's order), then the collector's with the bytes left
  assert.equal(posted.length, 2);
  const [dap, ldp] = posted as [Posted, Posted];
  assert.equal(dap.url, UPLOAD_URL);
  assert.equal(ldp.url, "https://collector.example/v1/campaigns/local/reports");
  assert.ok(dap.keepalive && ldp.keepalive);
  const ldpReports = (JSON.parse(new TextDecoder().decode(ldp.body)) as { reports: unknown[] }).reports.length;
  assert.equal(sent, 4 + ldpReports);
  assert.ok(ldpReports > 100 && ldpReports < 2000, `${ldpReports} of 2000 fit`);
  assert.ok(dap.body.length + ldp.body.length <= 64 * 1024);
  assert.ok(dap.body.length + ldp.body.length > 64 * 1024 - 100, "the budget left is used");

  // the driver alone: only whole Reports within the budget, none when the first does not fit
  const queued = queuedIn(directory).filter((q) => q.campaign === "theme");
  const sizes = queued.map((q) => b64decode(q.payload, "payload").length);
  const { dap: driver } = await dapEntry(canonicalJson(THEME), undefined, mechanismFromConfig, false);
  const budget = (sizes[0] as number) + (sizes[1] as number) + 5;
  assert.deepEqual(driver.keepalive(queued, budget, 10, fetch), [5, 12]);
  assert.equal(posted.length, 3);
  assert.deepEqual((posted[2] as Posted).body, concatenated(queued.slice(0, 2).map((q) => b64decode(q.payload, "payload"))));
  assert.deepEqual(driver.keepalive(queued, (sizes[0] as number) - 1, 10, fetch), [(sizes[0] as number) - 1, 10]);
  assert.equal(posted.length, 3, "nothing sent when no Report fits");
});
