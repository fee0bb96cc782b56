// A Node device for tests/client_sdk_ts: reads {"package", "url", "campaign", "state", "values",
// "seed", "policy"?} as JSON on stdin, records every value through the built package's TelemetryClient
// (a state folder, HmacWordSource(seed) as the noise source), flushes, and prints what happened.
// With "devices": true, each value is recorded by its own device instead (in-memory state, its
// device secret and noise source derived from seed and its index, so the run is reproducible):
// what a memoized campaign needs, as one device gives one permanent response per value.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(0, "utf8"));
const sdk = await import(pathToFileURL(job.package).href);
const seed = Uint8Array.from(Buffer.from(job.seed, "hex"));
// the app's privacy policy (PrivacyPolicy options), when the job states one
const policy = job.policy === undefined ? {} : { policy: new sdk.PrivacyPolicy(job.policy) };

if (job.devices) {
  const { BudgetLedger } = await import(pathToFileURL(job.package.replace(/index\.js$/, "ledger.js")).href);
  const derive = (what, i) => createHash("sha256").update(`${what} ${i} ${job.seed}`).digest();
  let recorded = 0;
  let acknowledged = 0;
  let left = 0;
  let lastError = null;
  for (let i = 0; i < job.values.length; i++) {
    const secret = derive("secret", i);
    const storage = new sdk.MemoryStorage();
    const ledger = new BudgetLedger(secret, { ledger: null, head: null }, { expectExisting: false });
    await storage.set([["device_secret", secret.toString("hex")], ...ledger.texts()]);
    const client = new sdk.TelemetryClient(job.url, { storage, rng: new sdk.HmacWordSource(derive("words", i)), ...policy });
    if (await client.record(job.campaign, job.values[i])) recorded += 1;
    acknowledged += await client.flush();
    left += await client.pending();
    lastError = client.status().last_error ?? lastError;
  }
  console.log(JSON.stringify({ recorded, acknowledged, left, status: { last_error: lastError } }));
} else {
  const client = new sdk.TelemetryClient(job.url, {
    storage: new sdk.FolderStorage(job.state),
    rng: new sdk.HmacWordSource(seed),
    ...policy,
  });
  const first = await client.record(job.campaign, job.values[0]);
  const rest = await client.recordMany(job.campaign, job.values.slice(1));
  const pending = await client.pending();
  const acknowledged = await client.flush();
  console.log(JSON.stringify({ recorded: (first ? 1 : 0) + rest.length, pending, acknowledged, left: await client.pending(), status: client.status() }));
}
