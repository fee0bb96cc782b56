/**
 * prepareReport against the Python SDK's `client_sdk.dap.upload.prepare_report`: the same
 * randomness (report id, Prio3 rand, HPKE ephemeral keys) gives the same encoded Report, byte
 * for byte (fixtures from test/fixtures/make_dap_reports.py).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { fromHex, toHex } from "../src/wire.js";
import { BatchMode, DapCodecError, HpkeError, decodeHpkeConfigList, encodeReport, prepareReport, selectHpkeConfig, vdafConfiguration, type DapTask } from "../src/dap/index.js";
import { Prio3, Prio3Count, Prio3Histogram, Prio3MultihotCountVec, Prio3Sum, Prio3SumVec } from "../src/vdaf/prio3.js";

// dist/test/ -> test/fixtures/ in the source tree
const FIXTURE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "test", "fixtures", "dap_reports.json");

interface Case {
  vdaf: string;
  params: Record<string, number>;
  measurement: unknown;
  task_id: string;
  task_info: string;
  leader_endpoint: string;
  helper_endpoint: string;
  time_precision: number;
  min_batch_size: number;
  vdaf_type: number;
  vdaf_configuration: string;
  leader_hpke_config_list: string;
  helper_hpke_config_list: string;
  now: number;
  report_id: string;
  rand: string;
  leader_ephemeral_ikm: string;
  helper_ephemeral_ikm: string;
  report: string;
}

const CASES = (JSON.parse(readFileSync(FIXTURE, "utf-8")) as { cases: Case[] }).cases;

function vdafOf(c: Case): Prio3<never> {
  const p = (name: string): number => {
    const v = c.params[name];
    assert.ok(v !== undefined, `${c.vdaf}: missing ${name}`);
    return v;
  };
  const vdafs: Record<string, () => Prio3<never>> = {
    Prio3Count: () => new Prio3Count(2) as Prio3<never>,
    Prio3Sum: () => new Prio3Sum(2, p("max_measurement")) as Prio3<never>,
    Prio3SumVec: () => new Prio3SumVec(2, p("length"), p("max_measurement"), p("chunk_length")) as Prio3<never>,
    Prio3Histogram: () => new Prio3Histogram(2, p("length"), p("chunk_length")) as Prio3<never>,
    Prio3MultihotCountVec: () => new Prio3MultihotCountVec(2, p("length"), p("max_weight"), p("chunk_length")) as Prio3<never>,
  };
  const make = vdafs[c.vdaf];
  assert.ok(make !== undefined, `unknown vdaf ${c.vdaf}`);
  return make();
}

function taskOf(c: Case): DapTask<never> {
  const vdaf = vdafOf(c);
  const [vdafType, config] = vdafConfiguration(vdaf);
  assert.equal(vdafType, c.vdaf_type);
  assert.equal(toHex(config), c.vdaf_configuration, "vdaf_configuration");
  return {
    taskId: fromHex(c.task_id),
    configuration: {
      taskInfo: new TextEncoder().encode(c.task_info),
      leaderAggregatorEndpoint: c.leader_endpoint,
      helperAggregatorEndpoint: c.helper_endpoint,
      timePrecision: c.time_precision,
      minBatchSize: c.min_batch_size,
      batchMode: BatchMode.TIME_INTERVAL,
      vdafType,
      vdafConfiguration: config,
    },
    vdaf,
    leaderHpkeConfig: selectHpkeConfig(decodeHpkeConfigList(fromHex(c.leader_hpke_config_list)), "leader"),
    helperHpkeConfig: selectHpkeConfig(decodeHpkeConfigList(fromHex(c.helper_hpke_config_list)), "helper"),
  };
}

test("the fixture holds one report per Prio3 variant", () => {
  assert.deepEqual(CASES.map((c) => c.vdaf).sort(), ["Prio3Count", "Prio3Histogram", "Prio3MultihotCountVec", "Prio3Sum", "Prio3SumVec"]);
});

for (const c of CASES) {
  test(`prepareReport gives Python's report for ${c.vdaf}`, async () => {
    const report = await prepareReport(taskOf(c), c.measurement as never, {
      now: c.now,
      reportId: fromHex(c.report_id),
      rand: fromHex(c.rand),
      ephemeralIkms: [fromHex(c.leader_ephemeral_ikm), fromHex(c.helper_ephemeral_ikm)],
    });
    assert.equal(toHex(encodeReport(report)), c.report);
  });
}

test("by default the report id, rand and ephemeral keys are random: two reports differ, of the same length", async () => {
  const c = CASES.find((x) => x.vdaf === "Prio3Histogram");
  assert.ok(c !== undefined);
  const task = taskOf(c);
  const [a, b] = [await prepareReport(task, 3 as never), await prepareReport(task, 3 as never)];
  assert.notEqual(toHex(a.reportMetadata.reportId), toHex(b.reportMetadata.reportId));
  assert.notEqual(toHex(a.publicShare), toHex(b.publicShare));
  assert.equal(encodeReport(a).length, fromHex(c.report).length);
});

test("a task whose VDAF differs from its configuration, or an unsupported suite, is refused by name", async () => {
  const c = CASES.find((x) => x.vdaf === "Prio3Count");
  assert.ok(c !== undefined);
  const task = taskOf(c);
  await assert.rejects(prepareReport({ ...task, vdaf: new Prio3Sum(2, 7) as Prio3<never> }, 1 as never), (e: Error) => e instanceof DapCodecError && /vdaf_type/.test(e.message));
  await assert.rejects(prepareReport({ ...task, helperHpkeConfig: { ...task.helperHpkeConfig, aeadId: 3 } }, 1 as never), (e: Error) => e instanceof HpkeError && /helper_hpke_config: .*aead_id 0x0003/.test(e.message));
  await assert.rejects(prepareReport({ ...task, taskId: new Uint8Array(31) }, 1 as never), /task_id must be 32 bytes; got 31/);
  assert.throws(() => vdafConfiguration(new Prio3Count(3) as Prio3<never>), /3 shares and 1 proofs/);
  assert.throws(() => selectHpkeConfig([], "leader"), /leader's hpke_config list has no supported config: the list is empty/);
});

test("without crypto.getRandomValues, prepareReport refuses with a clear error", async () => {
  const c = CASES.find((x) => x.vdaf === "Prio3Count");
  assert.ok(c !== undefined);
  const task = taskOf(c);
  const saved = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  Object.defineProperty(globalThis, "crypto", { value: undefined, configurable: true });
  try {
    await assert.rejects(prepareReport(task, 1 as never), /needs crypto\.getRandomValues/);
  } finally {
    if (saved !== undefined) Object.defineProperty(globalThis, "crypto", saved);
  }
});
