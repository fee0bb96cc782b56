// A fleet of Node devices for tests/client_sdk_ts/test_node_dap.py: reads {"package", "url",
// "document" (a secure-aggregation campaign's JSON text, pinned; or "name" alone, and each
// device fetches the document from the collector at "url"), "policy" (PrivacyPolicy
// options), "devices" (one list of values per device), "state", "seed"} as JSON on stdin. Each
// device is a TelemetryClient of the built package with its own state folder and word source
// (HmacWordSource of seed and its index); it records its values, flushes to the campaign's
// Leader, and the run prints what happened as one JSON line. With "lose_first_answer", each
// device's first upload reaches the Leader but its answer is lost (the fetch then fails), so the
// device retries the same reports.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(0, "utf8"));
const sdk = await import(pathToFileURL(job.package).href);
const name = job.document === undefined ? job.name : JSON.parse(job.document).name;
const policy = new sdk.PrivacyPolicy(job.policy);
let recorded = 0;
let acknowledged = 0;
let left = 0;
const errors = [];
const dropped = [];
const ids = [];
let lost = 0;
for (const [i, values] of job.devices.entries()) {
  let first = Boolean(job.lose_first_answer);
  const fetcher = async (url, init) => {
    const response = await fetch(url, init);
    if (!first) return response;
    first = false;
    lost += 1;
    await response.arrayBuffer();
    throw new TypeError("the answer was lost (test)");
  };
  const client = new sdk.TelemetryClient(job.url, {
    fetch: fetcher,
    storage: new sdk.FolderStorage(join(job.state, `device-${i}`)),
    campaigns: job.document === undefined ? [] : [job.document],
    policy,
    rng: new sdk.HmacWordSource(createHash("sha256").update(`words ${i} ${job.seed}`).digest()),
    flushOnPagehide: false,
  });
  const made = await client.recordMany(name, values);
  recorded += made.length;
  ids.push(...made);
  acknowledged += await client.flush();
  left += await client.pending();
  const status = client.status();
  if (status.last_error !== null) errors.push(status.last_error);
  if (Object.keys(status.dropped).length) dropped.push(status.dropped);
}
console.log(JSON.stringify({ recorded, acknowledged, left, errors, dropped, ids, lost }));
