/**
 * The device's side of a DAP upload (draft-ietf-ppm-dap-18, "Uploading Reports"), the twin of
 * the Python SDK's `client_sdk.dap.upload.prepare_report`: shard a measurement with Prio3
 * (report id as the nonce, `"dap-18" || task_id` as the context), wrap each input share in a
 * `PlaintextInputShare` and seal it to its Aggregator with HPKE, binding the task, its
 * configuration, the report's metadata and the public share as AAD. The measurement never
 * leaves this function in the clear. The client's upload to the Leader is src/dap/driver.ts.
 */
import { Prio3, Prio3Count, Prio3Histogram, Prio3MultihotCountVec, Prio3Sum, Prio3SumVec } from "../vdaf/prio3.js";
import { concatBytes } from "../vdaf/xof.js";
import { HpkeError, checkSuite, randomBytes, sealBase } from "./hpke.js";
import {
  type AggregatorRole,
  DapCodecError,
  type HpkeCiphertext,
  type HpkeConfig,
  REPORT_ID_SIZE,
  type Report,
  type ReportMetadata,
  Role,
  TASK_ID_SIZE,
  type TaskConfiguration,
  encodeInputShareAad,
  encodePlaintextInputShare,
  inputShareInfo,
  uint,
  vdafContext,
} from "./messages.js";

/**
 * `[vdaf_type, vdaf_configuration]` of a two-share, one-proof Prio3 variant (DAP-18, "VDAF
 * Configuration Encodings"; the type is the VDAF's codepoint).
 */
export function vdafConfiguration(vdaf: Prio3<never>): [number, Uint8Array] {
  if (vdaf.SHARES !== 2 || vdaf.PROOFS !== 1) {
    throw new DapCodecError(`vdaf has ${vdaf.SHARES} shares and ${vdaf.PROOFS} proofs: DAP's Prio3 encodings are for 2 shares (Leader, Helper) and 1 proof`);
  }
  const p = vdaf.valid.params as Record<string, number | bigint>;
  const u = (name: string, size: number): Uint8Array => uint(p[name] as number | bigint, size, name);
  if (vdaf instanceof Prio3Count) return [vdaf.ID, new Uint8Array(0)];
  if (vdaf instanceof Prio3Sum) return [vdaf.ID, u("max_measurement", 8)];
  if (vdaf instanceof Prio3SumVec) return [vdaf.ID, concatBytes(u("length", 4), u("max_measurement", 8), u("chunk_length", 4))];
  if (vdaf instanceof Prio3Histogram) return [vdaf.ID, concatBytes(u("length", 4), u("chunk_length", 4))];
  if (vdaf instanceof Prio3MultihotCountVec) return [vdaf.ID, concatBytes(u("length", 4), u("chunk_length", 4), u("max_weight", 8))];
  throw new DapCodecError(`vdaf ${vdaf.constructor.name} has no DAP configuration encoding`);
}

/** The first config of an Aggregator's list whose suite this SDK supports (DAP-18). */
export function selectHpkeConfig(configs: readonly HpkeConfig[], aggregator: string): HpkeConfig {
  const reasons: string[] = [];
  for (const config of configs) {
    try {
      checkSuite(config.kemId, config.kdfId, config.aeadId);
      return config;
    } catch (error) {
      reasons.push(`config ${config.id}: ${(error as Error).message}`);
    }
  }
  throw new HpkeError(`${aggregator}'s hpke_config list has no supported config: ${reasons.join("; ") || "the list is empty"}`);
}

/** What a device needs to know of a task: id, configuration, VDAF, each Aggregator's HPKE config. */
export interface DapTask<M> {
  readonly taskId: Uint8Array;
  readonly configuration: TaskConfiguration;
  readonly vdaf: Prio3<M>;
  readonly leaderHpkeConfig: HpkeConfig;
  readonly helperHpkeConfig: HpkeConfig;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Refuse a task whose id, VDAF or HPKE configs the report could not be sealed for. */
export function checkTask<M>(task: DapTask<M>): void {
  if (!(task.taskId instanceof Uint8Array) || task.taskId.length !== TASK_ID_SIZE) {
    throw new DapCodecError(`task_id must be ${TASK_ID_SIZE} bytes; got ${task.taskId instanceof Uint8Array ? task.taskId.length : typeof task.taskId}`);
  }
  const [type, config] = vdafConfiguration(task.vdaf as Prio3<never>);
  if (type !== task.configuration.vdafType || !equalBytes(config, task.configuration.vdafConfiguration)) {
    throw new DapCodecError(`vdaf ${task.vdaf.constructor.name} does not match the task configuration's vdaf_type and vdaf_configuration`);
  }
  for (const [name, c] of [
    ["leader_hpke_config", task.leaderHpkeConfig],
    ["helper_hpke_config", task.helperHpkeConfig],
  ] as const) {
    try {
      checkSuite(c.kemId, c.kdfId, c.aeadId);
    } catch (error) {
      throw new HpkeError(`${name}: ${(error as Error).message}`);
    }
  }
}

/** Options of {@link prepareReport}; all but `now` are for tests (fixed randomness). */
export interface PrepareOptions {
  /** POSIX seconds (default: the clock). */
  now?: number;
  reportId?: Uint8Array;
  rand?: Uint8Array;
  /** The HPKE ephemeral key material for the Leader's and the Helper's seal. */
  ephemeralIkms?: readonly [Uint8Array, Uint8Array];
}

/**
 * A `Report` for `measurement`: report id and sharding randomness from
 * `crypto.getRandomValues`, time in units of the task's `time_precision`.
 */
export async function prepareReport<M>(task: DapTask<M>, measurement: M, options: PrepareOptions = {}): Promise<Report> {
  checkTask(task);
  const vdaf = task.vdaf;
  const reportId = options.reportId ?? randomBytes(REPORT_ID_SIZE);
  const rand = options.rand ?? randomBytes(vdaf.RAND_SIZE);
  const seconds = Math.floor(options.now ?? Date.now() / 1000);
  const metadata: ReportMetadata = { reportId, time: Math.floor(seconds / task.configuration.timePrecision) };
  const [publicShare, inputShares] = vdaf.shard(vdafContext(task.taskId), measurement, reportId, rand);
  const encodedPublic = vdaf.encodePublicShare(publicShare);
  const aad = encodeInputShareAad(task.taskId, task.configuration, metadata, encodedPublic);
  const seal = async (role: AggregatorRole, index: 0 | 1): Promise<HpkeCiphertext> => {
    const config = role === Role.LEADER ? task.leaderHpkeConfig : task.helperHpkeConfig;
    const plaintext = encodePlaintextInputShare(vdaf.encodeInputShare(inputShares[index] as (typeof inputShares)[number]));
    const [enc, payload] = await sealBase(config.publicKey, inputShareInfo(role), aad, plaintext, options.ephemeralIkms?.[index]);
    return { configId: config.id, enc, payload };
  };
  return {
    reportMetadata: metadata,
    publicShare: encodedPublic,
    leaderEncryptedInputShare: await seal(Role.LEADER, 0),
    helperEncryptedInputShare: await seal(Role.HELPER, 1),
  };
}
