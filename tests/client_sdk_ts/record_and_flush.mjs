// A Node device for tests/client_sdk_ts: reads {"package", "url", "campaign", "state", "values",
// "seed"} as JSON on stdin, records every value through the built package's TelemetryClient
// (a state folder, HmacWordSource(seed) as the noise source), flushes, and prints what happened.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const job = JSON.parse(readFileSync(0, "utf8"));
const sdk = await import(pathToFileURL(job.package).href);
const seed = Uint8Array.from(Buffer.from(job.seed, "hex"));
const client = new sdk.TelemetryClient(job.url, {
  storage: new sdk.FolderStorage(job.state),
  rng: new sdk.HmacWordSource(seed),
});
const first = await client.record(job.campaign, job.values[0]);
const rest = await client.recordMany(job.campaign, job.values.slice(1));
const pending = await client.pending();
const acknowledged = await client.flush();
console.log(JSON.stringify({ recorded: (first ? 1 : 0) + rest.length, pending, acknowledged, left: await client.pending(), status: client.status() }));
