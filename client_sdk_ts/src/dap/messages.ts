/**
 * The DAP-18 messages a Client sends (draft-ietf-ppm-dap-18), in the TLS presentation language
 * (RFC 8446, Section 3: big-endian integers, length-prefixed opaque vectors): the encoding
 * half of the Python SDK's `client_sdk.dap.messages` for the upload path, and the decoding of
 * an Aggregator's `HpkeConfigList`.
 */
import { concatBytes } from "../vdaf/xof.js";

export const DAP_VERSION = "dap-18";
export const TASK_ID_SIZE = 32;
export const REPORT_ID_SIZE = 16;
/** Each DAP message's media type is this and its name (DAP-18; Python: `MEDIA_TYPE_PREFIX`). */
export const MEDIA_TYPE_PREFIX = "application/ppm-dap;message=";

/** `Role` (Section 4.1). */
export const Role = { COLLECTOR: 0, CLIENT: 1, LEADER: 2, HELPER: 3 } as const;
export type AggregatorRole = typeof Role.LEADER | typeof Role.HELPER;

/** `BatchMode` (Section 5). */
export const BatchMode = { TIME_INTERVAL: 1, LEADER_SELECTED: 2 } as const;

/** A value no DAP message can carry, or a message that does not decode: names the field. */
export class DapCodecError extends Error {
  override name = "DapCodecError";
}

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/** `value` as a big-endian unsigned integer of `size` bytes. */
export function uint(value: number | bigint, size: number, field: string): Uint8Array {
  const v = typeof value === "bigint" ? value : Number.isSafeInteger(value) ? BigInt(value) : -1n;
  if (v < 0n || v >= 1n << BigInt(8 * size)) throw new DapCodecError(`${field} does not fit in uint${8 * size} (got ${typeof value})`);
  const out = new Uint8Array(size);
  let rest = v;
  for (let i = size - 1; i >= 0; i--, rest >>= 8n) out[i] = Number(rest & 0xffn);
  return out;
}

/** `opaque field<0..2^(8*prefix)-1>`: a `prefix`-byte length, then `data`. */
export function opaque(data: Uint8Array, prefix: number, field: string): Uint8Array {
  return concatBytes(uint(data.length, prefix, `length of ${field}`), data);
}

/** `opaque field[size]`: exactly `size` bytes. */
export function fixed(data: Uint8Array, size: number, field: string): Uint8Array {
  if (!(data instanceof Uint8Array) || data.length !== size) {
    const got = data instanceof Uint8Array ? `${data.length} bytes` : typeof data;
    throw new DapCodecError(`${field} must be ${size} bytes; got ${got}`);
  }
  return data;
}

/** The VDAF application context, `"dap-18" || task_id` (Section 4.5.2). */
export function vdafContext(taskId: Uint8Array): Uint8Array {
  return concatBytes(utf8(DAP_VERSION), fixed(taskId, TASK_ID_SIZE, "task_id"));
}

/** HPKE info sealing an input share: `"dap-18 input share" || 0x01 || server_role`. */
export function inputShareInfo(serverRole: AggregatorRole): Uint8Array {
  if (serverRole !== Role.LEADER && serverRole !== Role.HELPER) throw new DapCodecError(`server_role must be LEADER or HELPER; got ${serverRole}`);
  return concatBytes(utf8(`${DAP_VERSION} input share`), Uint8Array.of(Role.CLIENT, serverRole));
}

/** `HpkeConfig` (Section 4.5.1): an Aggregator's public key and suite. */
export interface HpkeConfig {
  readonly id: number;
  readonly kemId: number;
  readonly kdfId: number;
  readonly aeadId: number;
  readonly publicKey: Uint8Array;
}

export function encodeHpkeConfig(c: HpkeConfig): Uint8Array {
  return concatBytes(uint(c.id, 1, "id"), uint(c.kemId, 2, "kem_id"), uint(c.kdfId, 2, "kdf_id"), uint(c.aeadId, 2, "aead_id"), opaque(c.publicKey, 2, "public_key"));
}

/** Reads an encoded message field by field; every error names the field. */
class Reader {
  #pos = 0;
  constructor(
    readonly data: Uint8Array,
    readonly message: string,
  ) {}

  remaining(): number {
    return this.data.length - this.#pos;
  }

  fixed(size: number, field: string): Uint8Array {
    if (this.remaining() < size) {
      throw new DapCodecError(`${this.message}.${field}: needs ${size} bytes at offset ${this.#pos}, ${this.remaining()} left`);
    }
    const out = this.data.slice(this.#pos, this.#pos + size);
    this.#pos += size;
    return out;
  }

  uint(size: number, field: string): number {
    return this.fixed(size, field).reduce((acc, b) => acc * 256 + b, 0);
  }

  opaque(prefix: number, field: string): Uint8Array {
    return this.fixed(this.uint(prefix, `${field} (length)`), field);
  }
}

/** `HpkeConfigList`: an Aggregator's configs in decreasing order of preference. */
export function decodeHpkeConfigList(data: Uint8Array): HpkeConfig[] {
  const outer = new Reader(data, "HpkeConfigList");
  const r = new Reader(outer.opaque(2, "configs"), "HpkeConfigList.configs");
  if (outer.remaining() > 0) throw new DapCodecError(`HpkeConfigList: ${outer.remaining()} trailing bytes`);
  const configs: HpkeConfig[] = [];
  while (r.remaining() > 0) {
    configs.push({ id: r.uint(1, "id"), kemId: r.uint(2, "kem_id"), kdfId: r.uint(2, "kdf_id"), aeadId: r.uint(2, "aead_id"), publicKey: r.opaque(2, "public_key") });
  }
  return configs;
}

/** `HpkeCiphertext`: `enc` and `payload` of `SealBase` and the config they used. */
export interface HpkeCiphertext {
  readonly configId: number;
  readonly enc: Uint8Array;
  readonly payload: Uint8Array;
}

export function encodeHpkeCiphertext(c: HpkeCiphertext): Uint8Array {
  return concatBytes(uint(c.configId, 1, "config_id"), opaque(c.enc, 2, "enc"), opaque(c.payload, 4, "payload"));
}

/** `TaskConfiguration` (Section 4.2), bound into every input share's AAD (no extensions). */
export interface TaskConfiguration {
  readonly taskInfo: Uint8Array;
  readonly leaderAggregatorEndpoint: string;
  readonly helperAggregatorEndpoint: string;
  readonly timePrecision: number;
  readonly minBatchSize: number;
  readonly batchMode: number;
  readonly vdafType: number;
  readonly vdafConfiguration: Uint8Array;
  readonly batchConfig?: Uint8Array;
}

export function encodeTaskConfiguration(t: TaskConfiguration): Uint8Array {
  if (t.taskInfo.length < 1 || t.taskInfo.length > 255) throw new DapCodecError(`task_info has ${t.taskInfo.length} bytes, expected 1 to 255`);
  if (!Number.isSafeInteger(t.timePrecision) || t.timePrecision <= 0) throw new DapCodecError("time_precision must be a positive integer");
  return concatBytes(
    opaque(t.taskInfo, 1, "task_info"),
    opaque(utf8(t.leaderAggregatorEndpoint), 2, "leader_aggregator_endpoint"),
    opaque(utf8(t.helperAggregatorEndpoint), 2, "helper_aggregator_endpoint"),
    uint(t.timePrecision, 8, "time_precision"),
    uint(t.minBatchSize, 8, "min_batch_size"),
    uint(t.batchMode, 1, "batch_mode"),
    opaque(t.batchConfig ?? new Uint8Array(0), 2, "batch_config"),
    uint(t.vdafType, 4, "vdaf_type"),
    opaque(t.vdafConfiguration, 2, "vdaf_configuration"),
    uint(0, 2, "length of extensions"),
  );
}

/** `ReportMetadata`: the report id (the VDAF nonce) and its time (no public extensions). */
export interface ReportMetadata {
  readonly reportId: Uint8Array;
  readonly time: number;
}

export function encodeReportMetadata(m: ReportMetadata): Uint8Array {
  return concatBytes(fixed(m.reportId, REPORT_ID_SIZE, "report_id"), uint(m.time, 8, "time"), uint(0, 2, "length of public_extensions"));
}

/** `Report`: what a Client uploads to the Leader. */
export interface Report {
  readonly reportMetadata: ReportMetadata;
  readonly publicShare: Uint8Array;
  readonly leaderEncryptedInputShare: HpkeCiphertext;
  readonly helperEncryptedInputShare: HpkeCiphertext;
}

export function encodeReport(r: Report): Uint8Array {
  return concatBytes(
    encodeReportMetadata(r.reportMetadata),
    opaque(r.publicShare, 4, "public_share"),
    encodeHpkeCiphertext(r.leaderEncryptedInputShare),
    encodeHpkeCiphertext(r.helperEncryptedInputShare),
  );
}

/** `PlaintextInputShare` with no private extensions: what is sealed to one Aggregator. */
export function encodePlaintextInputShare(payload: Uint8Array): Uint8Array {
  return concatBytes(uint(0, 2, "length of private_extensions"), opaque(payload, 4, "payload"));
}

/** `InputShareAad`: binds an input share to its task, configuration and report. */
export function encodeInputShareAad(taskId: Uint8Array, config: TaskConfiguration, metadata: ReportMetadata, publicShare: Uint8Array): Uint8Array {
  return concatBytes(fixed(taskId, TASK_ID_SIZE, "task_id"), encodeTaskConfiguration(config), encodeReportMetadata(metadata), opaque(publicShare, 4, "public_share"));
}
