// Prio3 shard time in Node (issue 24's figure: Prio3Histogram of length 1024 in at most 80 ms).
// Run after `npm run build`: node scripts/bench-prio3.mjs [--reps N]
// Prints the median CPU and wall milliseconds of one shard (fresh nonce and rand each time).
import { randomBytes } from "node:crypto";
import { Prio3Count, Prio3Histogram } from "../dist/src/vdaf/index.js";

const repsArg = process.argv.indexOf("--reps");
const reps = repsArg > 0 ? Number(process.argv[repsArg + 1]) : 30;

function bench(name, vdaf, measurement) {
  const ctx = new TextEncoder().encode("bench");
  const run = () => vdaf.shard(ctx, measurement, randomBytes(16), randomBytes(vdaf.RAND_SIZE));
  for (let i = 0; i < 3; i++) run(); // warm up the JIT and the root tables
  const wall = [];
  const cpu = [];
  for (let i = 0; i < reps; i++) {
    const start = process.hrtime.bigint();
    const startCpu = process.cpuUsage();
    run();
    const used = process.cpuUsage(startCpu);
    cpu.push((used.user + used.system) / 1e3);
    wall.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(2);
  // CPU time is the cost of a shard; wall time adds the waits of a loaded machine.
  console.log(`${name}: median ${median(cpu)} ms CPU, ${median(wall)} ms wall, over ${reps} shards`);
}

bench("Prio3Count", new Prio3Count(2), 1);
bench("Prio3Histogram(length=1024, chunk_length=32)", new Prio3Histogram(2, 1024, 32), 517);
