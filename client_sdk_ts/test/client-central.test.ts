/**
 * The client's central ceiling for shuffled campaigns (docs/shuffler.md, "The device's policy"):
 * a local epsilon above max_epsilon is accepted only through a shuffler, under the app's
 * max_central_epsilon, when the device's own amplification bound confirms the campaign's target.
 * The campaigns use the registry's grr; the shuffler is a local HTTP server.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { HmacWordSource, PolicyViolation, PrivacyPolicy, TelemetryClient } from "../src/index.js";

const sealed = JSON.parse(readFileSync(new URL("../../../conformance/sealed.json", import.meta.url), "utf8")) as {
  public_key: string;
  key_id: string;
};
const LABELS = ["light", "dark", "system", "contrast"];
/** The collector's calibration for (1, 1e-6) at 10^5 (docs/shuffler.md: 7.07). */
const CALIBRATED = "7.06994";
const SHUFFLE = '{"central_epsilon":1.0,"delta":1e-06,"min_batch":100000}';

/** A served shuffled campaign document (JSON text as Python writes it). */
function shuffledText(epsilon: string, shuffle = SHUFFLE): string {
  const mechanism = `{"epsilon":${epsilon},"k":4,"mechanism":"grr"}`;
  const domain = JSON.stringify(LABELS);
  const content = `{"domain":${domain},"mechanism":${mechanism},"min_batch_size":100,"policy":null,"shuffle":${shuffle}}`;
  const id = createHash("sha256").update(content).digest("hex").slice(0, 32);
  const key = `{"key_id":"${sealed.key_id}","key":"${sealed.public_key}"}`;
  return `{"name":"theme","protocol":1,"mechanism":${mechanism},"domain":${domain},"policy":null,"min_batch_size":100,"shuffle":${shuffle},"public_key":${key},"config_id":"${id}"}`;
}

const CEILING = new PrivacyPolicy({ max_central_epsilon: 1.0 });

/** A shuffler that stores every upload (and a collector that serves `document`). */
async function server(document?: string) {
  let reports = 0;
  const http = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      if (request.method === "GET" && document !== undefined) {
        response.writeHead(200, { "Content-Type": "application/json" }).end(document);
        return;
      }
      const upload = JSON.parse(body) as { reports: unknown[] };
      reports += upload.reports.length;
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ accepted: upload.reports.length, duplicate: 0, rejected: [] }));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return { url, reports: () => reports, close: () => new Promise((resolve) => http.close(resolve)) };
}

function client(campaigns: string[], options: { policy?: PrivacyPolicy; shufflerUrl?: string; baseUrl?: string } = {}) {
  return new TelemetryClient(options.baseUrl ?? "http://127.0.0.1:9", {
    campaigns,
    policy: options.policy ?? CEILING,
    ...(options.shufflerUrl === undefined ? {} : { shufflerUrl: options.shufflerUrl }),
    rng: new HmacWordSource(new Uint8Array(32).fill(3)),
    retries: 0,
  });
}

/** A PolicyViolation naming `field`, with the campaign's value and the policy's. */
function violation(field: string, campaignValue: number, policyValue: number, note?: RegExp) {
  return (error: Error): boolean => {
    assert.ok(error instanceof PolicyViolation, error.message);
    assert.equal(error.field, field);
    assert.equal(error.campaignValue, campaignValue);
    assert.equal(error.policyValue, policyValue);
    assert.match(error.message, new RegExp(`${field} is ${campaignValue} in the campaign`));
    if (note !== undefined) assert.match(error.message, note);
    return true;
  };
}

describe("a shuffled campaign above max_epsilon", () => {
  test("within max_central_epsilon, through a shuffler: accepted, recorded and uploaded to the shuffler", async () => {
    const shuffler = await server();
    try {
      const c = client([shuffledText(CALIBRATED)], { shufflerUrl: shuffler.url });
      await c.record("theme", "dark");
      await c.record("theme", "light");
      assert.equal(await c.flush(), 2);
      assert.equal(shuffler.reports(), 2);
    } finally {
      await shuffler.close();
    }
  });

  test("a larger local epsilon than the target allows is refused with the bound the device computed", () => {
    // 9.0 at 10^5 for (1, 1e-6): about 12 expected clones, so the bound is 9.0 itself
    assert.throws(
      () => client([shuffledText("9.0")], { shufflerUrl: "http://127.0.0.1:9" }),
      violation("max_central_epsilon", 9, 1, /the campaign claims central_epsilon 1\.0 for batches of 100000 at local epsilon 9\.0; the amplification bound gives 9 at delta 1e-06/),
    );
    // a hair above the calibration: the bound is 1.005, above the claimed 1.0
    assert.throws(
      () => client([shuffledText("7.077009939999999")], { shufflerUrl: "http://127.0.0.1:9" }),
      violation("max_central_epsilon", 1.0045993571749876, 1, /the amplification bound gives 1\.005 at delta 1e-06/),
    );
  });

  test("without a shuffler, or without a central ceiling, max_epsilon applies", () => {
    assert.throws(() => client([shuffledText(CALIBRATED)]), violation("max_epsilon", 7.06994, 4));
    assert.throws(
      () => client([shuffledText(CALIBRATED)], { policy: new PrivacyPolicy(), shufflerUrl: "http://127.0.0.1:9" }),
      violation("max_epsilon", 7.06994, 4),
    );
  });

  test("the declared target must be within the ceiling, the delta within max_central_delta", () => {
    const shufflerUrl = "http://127.0.0.1:9";
    assert.throws(() => client([shuffledText(CALIBRATED)], { policy: new PrivacyPolicy({ max_central_epsilon: 0.5 }), shufflerUrl }), violation("max_central_epsilon", 1, 0.5));
    assert.throws(
      () => client([shuffledText(CALIBRATED)], { policy: new PrivacyPolicy({ max_central_epsilon: 1, max_central_delta: 1e-8 }), shufflerUrl }),
      violation("max_central_delta", 1e-6, 1e-8),
    );
    assert.throws(
      () => client([shuffledText(CALIBRATED)], { policy: new PrivacyPolicy({ max_central_epsilon: 1, max_shuffled_epsilon: 7 }), shufflerUrl }),
      violation("max_shuffled_epsilon", 7.06994, 7),
    );
  });

  test("a fetched campaign is checked the same way before anything is randomized", async () => {
    const collector = await server(shuffledText("9.0"));
    try {
      const c = client([], { baseUrl: collector.url, shufflerUrl: "http://127.0.0.1:9" });
      await assert.rejects(c.record("theme", "dark"), violation("max_central_epsilon", 9, 1));
      assert.equal(await c.pending(), 0);
    } finally {
      await collector.close();
    }
  });

  test("a shuffle object Python refuses is refused naming the field", () => {
    const withoutDelta = '{"central_epsilon":1.0,"min_batch":100000}';
    assert.throws(() => client([shuffledText("1.0", withoutDelta)], { shufflerUrl: "http://127.0.0.1:9" }), /campaigns\[0\]: campaign theme: shuffle needs exactly .*missing \["delta"\]/);
    const oneReport = '{"central_epsilon":1.0,"delta":1e-06,"min_batch":1}';
    assert.throws(() => client([shuffledText("1.0", oneReport)], { shufflerUrl: "http://127.0.0.1:9" }), /shuffle\.min_batch must be an integer in \[2, /);
  });
});

describe("the browser bundle", () => {
  test("loads the bound's chunk with a shuffled campaign's document, then checks as Node does", async () => {
    // dist/browser.js (npm test builds it): the bound is in dist/browser/shuffled-*.js, fetched
    // only when a shuffled campaign is verified
    const bundle = (await import(new URL("../browser.js", import.meta.url).href)) as typeof import("../src/browser.js");
    const policy = new bundle.PrivacyPolicy({ max_central_epsilon: 1.0 });
    const options = { policy, shufflerUrl: "http://127.0.0.1:9", retries: 0, rng: new bundle.HmacWordSource(new Uint8Array(32)) };
    // the chunk is not loaded yet: the pinned campaign's check waits for it, and every operation rejects
    const refused = new bundle.TelemetryClient("http://127.0.0.1:9", { ...options, campaigns: [shuffledText("9.0")] });
    await assert.rejects(refused.record("theme", "dark"), (error: Error) => {
      assert.equal(error.name, "PolicyViolation");
      assert.match(error.message, /max_central_epsilon is 9 in the campaign, the policy allows 1 \(.*the amplification bound gives 9 at delta 1e-06\)/);
      return true;
    });
    const accepted = new bundle.TelemetryClient("http://127.0.0.1:9", { ...options, campaigns: [shuffledText(CALIBRATED)] });
    assert.match((await accepted.record("theme", "dark")) ?? "", /^[0-9a-f]{32}$/);
    // now loaded: checked at construction, as in Node
    assert.throws(() => new bundle.TelemetryClient("http://127.0.0.1:9", { ...options, campaigns: [shuffledText("9.0")] }), /max_central_epsilon is 9/);
  });
});
