// Figures of the TypeScript SDK against the Python SDK on this machine (issue 24, "Figures"):
//
//   npm run bench            (builds first; or: node scripts/bench.mjs after npm run build)
//
// 1. encode throughput in Node per mechanism (perturb + toWire, reports/s, the platform CSPRNG),
//    against the Python SDK's vectorized rate and one report at a time in Python (the repository's
//    .venv/bin/python, else python3 with the SDK importable; "n/a" when it cannot run);
// 2. the browser bundle's size, gzipped, as pages load it (scripts/size.mjs; target: at most 25 KB gzip);
// 3. record() latency in headless Chromium, p50/p99 (scripts/bench_browser.py, Playwright and the
//    system's /usr/bin/chromium; skipped when either is missing).
//
// Options: --seconds S (time per measurement, default 1), --mechanisms a,b (default: every
// registered one with a non-memoized conformance config), --no-browser.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { figures } from "./size.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, "..");
const repo = join(pkg, "..");
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const seconds = Number(option("--seconds", "1"));
const sdk = await import(join(pkg, "dist", "src", "index.js"));

/** The first non-memoized conformance config of `mechanism`, with the values of its cases. A
 * mechanism whose every such case holds a campaign (a device's own choices, e.g. PEM's level)
 * is measured without keys, as a simulated population: each report draws them from the words. */
function workload(mechanism) {
  const text = readFileSync(join(repo, "conformance", "vectors", `${mechanism}.json`), "utf8");
  const unmemoized = JSON.parse(text).cases.filter((c) => !("longitudinal" in c.config) && c.config.memoize !== true);
  let cases = unmemoized.filter((c) => !("campaign" in c));
  if (cases.length === 0 && unmemoized.length > 0 && sdk.mechanismFromConfig(unmemoized[0].config).usesDeviceChoices === true) {
    cases = unmemoized;
  }
  if (cases.length === 0) return null;
  const key = JSON.stringify(cases[0].config);
  const values = cases.filter((c) => JSON.stringify(c.config) === key).map((c) => c.value);
  return { config: cases[0].config, values };
}

/** Reports per second of `step(batch)` over `seconds`, each call making `batch` reports. */
function rate(step, batch) {
  step(batch); // warm-up
  let reports = 0;
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    step(batch);
    reports += batch;
  }
  return reports / ((performance.now() - started) / 1000);
}

function pythonRates(config, values) {
  const candidates = [join(repo, ".venv", "bin", "python"), "python3"];
  const python = candidates.find((p) => p === "python3" || existsSync(p));
  const script = `
import json, sys, time
import numpy as np
from client_sdk.mechanisms import mechanism_from_config
job = json.load(sys.stdin)
m = mechanism_from_config(job["config"])
values = job["values"]
records = {}  # batch size -> the records' device form (converted once, not timed)
def run(batch):
    data = (values * (batch // len(values) + 1))[:batch]
    if m.value_kind not in ("category", "number", "string"):
        # records and tuples from their JSON form, as the conformance vectors' device_values
        if batch not in records:
            records[batch] = m.encode_records([m.record_from_json(v) for v in data])
        array = records[batch]
    else:
        try:
            array = np.asarray(data)
        except Exception:
            array = np.asarray(data, dtype=object)
    m.to_wire(m.perturb(array, rng=None))
def measure(batch, seconds):
    run(batch)
    reports, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(batch); reports += batch
    return reports / (time.perf_counter() - start)
print(json.dumps({"vectorized": measure(10000, job["seconds"]), "one": measure(1, job["seconds"])}))
`;
  const result = spawnSync(python, ["-c", script], {
    input: JSON.stringify({ config, values, seconds }),
    cwd: repo,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (result.status !== 0) return null;
  try {
    return JSON.parse(result.stdout.trim().split("\n").pop());
  } catch {
    return null;
  }
}

const fmt = (x) => (x === null || x === undefined ? "n/a" : x >= 1e6 ? `${(x / 1e6).toFixed(2)}M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)}k` : x.toFixed(0));
const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}x` : "n/a");

const wanted = option("--mechanisms", null)?.split(",") ?? Object.keys(sdk.FACTORIES).sort();
console.log(`encode throughput (reports/s; ${seconds} s per figure; Node ${process.version})`);
console.log(["mechanism", "node", "python-vec", "python-1", "node/py-vec", "node/py-1"].map((h) => h.padEnd(12)).join(""));
for (const name of wanted) {
  if (!Object.hasOwn(sdk.FACTORIES, name)) {
    console.log(`${name.padEnd(12)}not registered in this build`);
    continue;
  }
  const job = workload(name);
  if (job === null) {
    console.log(`${name.padEnd(12)}no plain conformance config`);
    continue;
  }
  const mechanism = sdk.mechanismFromConfig(job.config);
  const rng = new sdk.CryptoWordSource();
  const node = rate((batch) => {
    const values = Array.from({ length: batch }, (_, i) => job.values[i % job.values.length]);
    mechanism.toWire(mechanism.perturb(values, { rng }));
  }, 1000);
  const python = pythonRates(job.config, job.values);
  console.log(
    [name, fmt(node), fmt(python?.vectorized), fmt(python?.one), ratio(node, python?.vectorized), ratio(node, python?.one)]
      .map((cell) => String(cell).padEnd(12))
      .join(""),
  );
}

const { entry, pages } = figures();
const kb = (bytes) => `${(bytes / 1000).toFixed(1)} KB`;
console.log(
  `\nbrowser bundle (npm run size for each chunk): entry dist/browser.js ${kb(entry.gzip)} gzip; a page recording one categorical campaign loads ` +
    `${kb(pages.categorical.gzip)} (target <= 25 KB: ${pages.categorical.gzip <= 25_000 ? "met" : "NOT met"}), every local mechanism ` +
    `${kb(pages.every_local_mechanism.gzip)}, with sealing ${kb(pages.every_local_mechanism_and_sealing.gzip)}`,
);

if (!args.includes("--no-browser")) {
  const python = [join(repo, ".venv", "bin", "python"), "python3"].find((p) => p === "python3" || existsSync(p));
  const result = spawnSync(python, [join(here, "bench_browser.py")], { cwd: repo, encoding: "utf8", timeout: 300_000 });
  console.log(`\nrecord() in headless Chromium: ${result.status === 0 ? result.stdout.trim() : `skipped (${(result.stderr || result.stdout).trim().split("\n").pop()})`}`);
}
