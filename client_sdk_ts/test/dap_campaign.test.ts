/**
 * Secure-aggregation campaigns against conformance/dap_campaigns.json (written by the Python
 * SDK's tests/client_sdk/dap/test_campaign_conformance.py): every document's verdict (valid,
 * or refused naming the field), every PrivacyPolicy verdict (accepted, or the field of the
 * PolicyViolation), every zCDP conversion it lists; and conformance/dap_campaign_reports.json
 * (tests/client_sdk/dap/test_campaign_reports.py): the reports `record` makes of values with
 * fixed randomness, byte for byte.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { canonicalJson, configId, JsonFloat, type JsonValue, parseJson, toPlain } from "../src/config.js";
import { parseDapCampaign } from "../src/dap/campaign.js";
import { zcdpEpsilon } from "../src/zcdp.js";
import { checkDapPolicy } from "../src/dap/policy.js";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { PolicyViolation, PrivacyPolicy, type PrivacyPolicyOptions } from "../src/policy.js";
import { fromHex } from "../src/wire.js";
import { HmacWordSource } from "../src/words.js";

// dist/test/ -> the repository's conformance/ folder
const CONFORMANCE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "conformance");
const DATA = parseJson(readFileSync(resolve(CONFORMANCE, "dap_campaigns.json"), "utf-8")) as Record<string, JsonValue>;
const REPORT_DATA = parseJson(readFileSync(resolve(CONFORMANCE, "dap_campaign_reports.json"), "utf-8")) as Record<string, JsonValue>;

interface DocumentCase {
  document: Record<string, JsonValue>;
  valid: boolean;
  field?: string;
}
interface PolicyCase {
  policy: Record<string, JsonValue>;
  campaign: number;
  refused_by: string | null;
}
interface ReportCase {
  document: Record<string, JsonValue>;
  values: unknown[];
  words_key: string;
  now: number;
  measurements: unknown[];
  clipped: number;
  reports: { report_id: string; rand: string; leader_ephemeral_ikm: string; helper_ephemeral_ikm: string; payload: string }[];
}

const DOCUMENTS = DATA.documents as unknown as DocumentCase[];
const POLICIES = DATA.policies as unknown as PolicyCase[];
const REPORTS = REPORT_DATA.cases as unknown as ReportCase[];
const ZCDP = (DATA.zcdp_epsilons ?? []) as unknown as { rho: JsonValue; delta: JsonValue; epsilon: JsonValue }[];

test("the conformance file holds valid and invalid documents, policies and reports", () => {
  assert.ok(DOCUMENTS.filter((c) => c.valid).length >= 3 && DOCUMENTS.some((c) => !c.valid));
  assert.ok(POLICIES.length >= 10);
  assert.deepEqual(REPORTS.map((r) => r.document.name).sort(), ["minutes", "opted-in", "theme", "theme-oue"]);
});

DOCUMENTS.forEach((c, index) => {
  const name = String(c.document.name);
  test(`document ${index} (${name}): ${c.valid ? "valid" : `refused by ${c.field}`}`, () => {
    if (c.valid) {
      const campaign = parseDapCampaign(c.document, name);
      assert.equal(campaign.configId, c.document.config_id);
      // the same verdict from the document's JSON text (what an app pins or a server serves)
      assert.equal(parseDapCampaign(canonicalJson(c.document), name).configId, campaign.configId);
      return;
    }
    assert.throws(
      () => parseDapCampaign(c.document, name),
      (error: Error) => error.message.includes(c.field as string),
      `document ${index} must be refused naming ${c.field}`,
    );
  });
});

POLICIES.forEach((c, index) => {
  test(`policy ${index}: ${c.refused_by === null ? "accepted" : `refused by ${c.refused_by}`}`, () => {
    const document = (DOCUMENTS[c.campaign] as DocumentCase).document;
    const campaign = parseDapCampaign(document, String(document.name));
    const policy = new PrivacyPolicy(toPlain(c.policy) as PrivacyPolicyOptions);
    if (c.refused_by === null) {
      checkDapPolicy(policy, campaign);
      return;
    }
    assert.throws(() => checkDapPolicy(policy, campaign), (error: Error) => error instanceof PolicyViolation && error.field === c.refused_by);
  });
});

ZCDP.forEach((c, index) => {
  test(`zCDP conversion ${index}: Python's epsilon to 1e-6, relative`, () => {
    const [rho, delta, epsilon] = [Number(c.rho), Number(c.delta), Number(c.epsilon)];
    assert.ok(Math.abs(zcdpEpsilon(rho, delta) - epsilon) <= 1e-6 * epsilon, `${zcdpEpsilon(rho, delta)} vs ${epsilon}`);
  });
});

for (const c of REPORTS) {
  const name = String(c.document.name);
  test(`record's reports for ${name} are Python's, byte for byte`, async () => {
    const campaign = parseDapCampaign(c.document, name);
    const local = campaign.local === null ? null : mechanismFromConfig(campaign.local);
    const { measurements, clipped } = campaign.sharded(c.values, local, new HmacWordSource(fromHex(c.words_key)));
    assert.deepEqual(measurements, c.measurements);
    assert.equal(clipped, c.clipped);
    assert.equal(c.reports.length, measurements.length);
    for (const [i, fixed] of c.reports.entries()) {
      const report = await campaign.report(measurements[i] as number | boolean[], c.now, {
        reportId: fromHex(fixed.report_id),
        rand: fromHex(fixed.rand),
        ephemeralIkms: [fromHex(fixed.leader_ephemeral_ikm), fromHex(fixed.helper_ephemeral_ikm)],
      });
      assert.equal(report.id, fixed.report_id);
      assert.equal(report.payload, fixed.payload, `${name} report ${i}`);
    }
  });
}

test("a charge is the smaller of the local and the central epsilon", () => {
  const [theme, count, sum] = DOCUMENTS.filter((d) => d.valid).map((d) => parseDapCampaign(d.document, String(d.document.name)));
  assert.equal(theme?.chargeAt(1e-6), 1); // local 2, laplace:1
  assert.equal(count?.chargeAt(1e-6), 0.5); // no local, laplace:0.5
  assert.equal(sum?.chargeAt(1e-6), Infinity); // no local, dp none
});

test("a bad value is refused naming its position and type, never echoing it", () => {
  const [theme, count, sum] = DOCUMENTS.filter((d) => d.valid).map((d) => parseDapCampaign(d.document, String(d.document.name)));
  assert.throws(() => theme?.measurements(["secret-label"]), (e: Error) => /position 0 \(a string of 12 characters\).*not a label/.test(e.message) && !e.message.includes("secret"));
  assert.throws(() => count?.measurements([2]), /position 0 \(a number\).*must be true or false/);
  assert.throws(() => sum?.measurements([1.5]), /position 0 \(a number\).*must be an integer/);
  assert.throws(() => sum?.measurements([new JsonFloat(1)]), /must be an integer/);
});

test("a malformed trusted_aggregators is refused naming the field, never echoing a key", () => {
  const theme = parseDapCampaign((DOCUMENTS[0] as DocumentCase).document, "theme");
  assert.throws(() => checkDapPolicy(new PrivacyPolicy({ trusted_aggregators: { "ftp://leader.example/": "x".repeat(43) } }), theme), /trusted_aggregators: a key is not an http\(s\) URL/);
  assert.throws(
    () => checkDapPolicy(new PrivacyPolicy({ trusted_aggregators: { "https://leader.example/dap/": "secret-but-short" } }), theme),
    (e: Error) => /trusted_aggregators\["https:\/\/leader.example\/dap\/"\] must be a 32-byte X25519 key.*a string of 16 characters/.test(e.message) && !e.message.includes("secret"),
  );
});

test("a gaussian:RHO task: its zCDP held to max_central_epsilon through its epsilon at max_central_delta", () => {
  // Python's docstring figure: 0.5-zCDP is epsilon 5.2215 at delta 1e-6
  assert.equal(Math.round(zcdpEpsilon(0.5, 1e-6) * 1e4) / 1e4, 5.2215);
  const theme = toPlain((DOCUMENTS[0] as DocumentCase).document) as Record<string, Record<string, unknown>>;
  const dap = { ...theme.dap, dp: "gaussian:1/8" };
  const content = { dap, local: null, domain: theme.domain, policy: null };
  const document = { name: "theme-zcdp", protocol: 1, dap, domain: theme.domain, config_id: configId(content) };
  const campaign = parseDapCampaign(document, "theme-zcdp");
  assert.equal(campaign.centralRho, 0.125);
  const at = zcdpEpsilon(0.125, 1e-6);
  assert.equal(campaign.chargeAt(1e-6), at);
  const trusted = (DATA.policies as unknown as PolicyCase[])[1]?.policy.trusted_aggregators as Record<string, string>;
  checkDapPolicy(new PrivacyPolicy({ trusted_aggregators: trusted, max_central_epsilon: at + 1e-4 }), campaign);
  assert.throws(
    () => checkDapPolicy(new PrivacyPolicy({ trusted_aggregators: trusted, max_central_epsilon: at - 1e-4 }), campaign),
    (e: Error) => e instanceof PolicyViolation && e.field === "max_central_epsilon" && /dp gaussian:1\/8 is 0.125-zCDP/.test(e.message),
  );
});

test("documents refused as Python refuses them: an unknown dp, a sum with local, a weak budget", () => {
  const theme = (DOCUMENTS[0] as DocumentCase).document;
  const edit = (change: (d: Record<string, unknown>) => void): Record<string, unknown> => {
    const d = structuredClone(toPlain(theme)) as Record<string, unknown>;
    change(d);
    return d;
  };
  assert.throws(() => parseDapCampaign(edit((d) => ((d.dap as Record<string, unknown>).dp = "gauss:0.1")), "theme"), /dap\.dp must be "none", "laplace:EPSILON" or "gaussian:RHO"/);
  assert.throws(() => parseDapCampaign(edit((d) => ((d.dap as Record<string, unknown>).dp = "gaussian:-0.5")), "theme"), /dap\.dp must be/);
  assert.throws(() => parseDapCampaign(edit((d) => ((d.dap as Record<string, unknown>).task_id = "AAAA")), "theme"), /dap\.task_id must be 32 bytes/);
  assert.throws(() => parseDapCampaign(edit((d) => ((d.dap as Record<string, unknown>).vdaf = { type: "histogram", length: 3 })), "theme"), /dap\.vdaf histogram takes/);
  assert.throws(() => parseDapCampaign(edit((d) => (d.policy = { epsilon_per_report: 0.5, reports_per_period: 4, period_seconds: 86400 })), "theme"), /policy\.epsilon_per_report 0\.5 is below what a report costs/);
  assert.throws(() => parseDapCampaign(edit((d) => (d.name = "other")), "theme"), /asked for campaign "theme"/);
  assert.throws(() => parseDapCampaign(edit((d) => (d.expires = "31/01/2027")), "theme"), /expires must be an ISO date/);
});
