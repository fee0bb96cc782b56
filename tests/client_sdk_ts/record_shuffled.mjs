// A Node device for tests/client_sdk_ts/test_node_shuffled_policy.py: reads {"package", "url",
// "shuffler"?, "campaign", "values", "seed", "policy"} as JSON on stdin, records the values of a
// shuffled campaign through the built package's TelemetryClient (in-memory state, the app's
// PrivacyPolicy, the shuffler when given), flushes, and prints what happened: the reports
// acknowledged, or the PolicyViolation (its field and values) that refused the campaign.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(0, "utf8"));
const sdk = await import(pathToFileURL(job.package).href);
const client = new sdk.TelemetryClient(job.url, {
  storage: new sdk.MemoryStorage(),
  rng: new sdk.HmacWordSource(Uint8Array.from(Buffer.from(job.seed, "hex"))),
  policy: new sdk.PrivacyPolicy(job.policy),
  ...(job.shuffler === undefined ? {} : { shufflerUrl: job.shuffler }),
  retries: 2,
});
try {
  const ids = await client.recordMany(job.campaign, job.values);
  const acknowledged = await client.flush();
  console.log(JSON.stringify({ recorded: ids.length, acknowledged, left: await client.pending(), last_error: client.status().last_error }));
} catch (error) {
  if (!(error instanceof sdk.PolicyViolation)) throw error;
  const { field, campaignValue, policyValue, message } = error;
  console.log(JSON.stringify({ refused: { field, campaign_value: campaignValue, policy_value: policyValue, message }, left: await client.pending() }));
}
