// Prio3 shard time in Node (issue 24's figure: Prio3Histogram of length 1024 in at most 80 ms).
// Run after `npm run build`: node scripts/bench-prio3.mjs [--reps N]
import { randomBytes } from "node:crypto";
import { Prio3Count, Prio3Histogram } from "../dist/src/vdaf/index.js";

const repsArg = process.argv.indexOf("--reps");
const reps = repsArg > 0 ? Number(process.argv[repsArg + 1]) : 30;

function bench(name, vdaf, measurement) {
  const ctx = new TextEncoder().encode("bench");
  const run = () => vdaf.shard(ctx, measurement, randomBytes(16), randomBytes(vdaf.RAND_SIZE));
  for (let i = 0; i < 3; i++) run(); // warm up the JIT and the root tables
  const times = [];
  for (let i = 0; i < reps; i++) {
    const start = process.hrtime.bigint();
    run();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`${name}: median ${median.toFixed(2)} ms, min ${times[0].toFixed(2)} ms over ${reps} shards`);
}

bench("Prio3Count", new Prio3Count(2), 1);
bench("Prio3Histogram(length=1024, chunk_length=32)", new Prio3Histogram(2, 1024, 32), 517);
