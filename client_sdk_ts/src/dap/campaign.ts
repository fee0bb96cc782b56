/**
 * Secure-aggregation campaigns: the document a device reads to report through a DAP pair
 * (docs/dap.md, "The device: secure-aggregation campaigns"; Python: `client_sdk.dap.campaign`).
 *
 * A campaign document with a `"dap"` object instead of `"mechanism"`: the DAP task's public part
 * and both Aggregators' `HpkeConfig`, an optional `local` grr randomizing the histogram index
 * (or the count's bit) before sharding, or the sue/oue whose bit vector a multihotcountvec task
 * shards (required there), the labels of its `domain`, and a budget `policy`.
 * {@link parseDapCampaign} verifies one as Python's `DapCampaign.from_document` does, check for
 * check and in the same order (every refusal names the field and the value's type, never a
 * value), and {@link DapCampaign.measurements} turns recorded values into Prio3 measurements.
 */
import { type BudgetPolicy, budgetPolicy, CAMPAIGN_NAME_PATTERN, canonicalJson, configId, describe, JsonFloat, type JsonValue, parseJson, MAX_DOCUMENT_BYTES, PROTOCOL_VERSION } from "../config.js";
import { Prio3, Prio3Count, Prio3Histogram, Prio3MultihotCountVec, Prio3Sum, Prio3SumVec } from "../vdaf/prio3.js";
import { base64Url } from "../wire.js";
import { HpkeError, X25519_KEY_SIZE, checkSuite } from "./hpke.js";
import type { Mechanism } from "../mechanisms/types.js";
import type { WordSource } from "../words.js";
import { BatchMode, type HpkeConfig, TASK_ID_SIZE, encodeReport } from "./messages.js";
import type { DapClaim } from "./policy.js";
import { type DapTask, type PrepareOptions, prepareReport, vdafConfiguration } from "./upload.js";
import { dpParameter, zcdpEpsilon } from "../zcdp.js";

/** The fields of a campaign's `dap` object: the task file's, then both Aggregators' keys. */
export const DAP_FIELDS = [
  "task_id",
  "task_info",
  "leader",
  "helper",
  "vdaf",
  "min_batch_size",
  "time_precision",
  "dp",
  "leader_hpke_config",
  "helper_hpke_config",
] as const;

/** `vdaf.type` -> its parameters, in the order of the Prio3 constructor. */
export const VDAF_PARAMETERS: Readonly<Record<string, readonly string[]>> = {
  count: [],
  sum: ["max_measurement"],
  histogram: ["length", "chunk_length"],
  sumvec: ["length", "max_measurement", "chunk_length"],
  multihotcountvec: ["length", "max_weight", "chunk_length"],
};

/**
 * `vdaf.type` -> the randomizers a campaign's `local` may name before it (Python:
 * `LOCAL_MECHANISMS`): k-ary randomized response reported one-hot, or a unary encoding reported
 * as its bit vector (Prio3's MultihotCountVec composition).
 */
export const LOCAL_MECHANISMS: Readonly<Record<string, readonly LocalMechanism[]>> = {
  histogram: ["grr"],
  count: ["grr"],
  multihotcountvec: ["sue", "oue"],
};

/** The randomizers a campaign's `local` may be. */
export type LocalMechanism = "grr" | "sue" | "oue";
/** A campaign's canonical `local` config. */
export type LocalConfig = { readonly mechanism: LocalMechanism; readonly epsilon: number; readonly k: number };

const HPKE_FIELDS = ["id", "kem_id", "kdf_id", "aead_id", "public_key"] as const;
const METADATA_TEXT = ["description", "unit", "owner"] as const;
const MAX_TEXT_LENGTH = 1000;
/** The ledger's relative slack (Python: `campaign.BUDGET_TOLERANCE`). */
const BUDGET_TOLERANCE = 1e-9;
const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

type JsonObject = { readonly [key: string]: JsonValue };

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof JsonFloat);
}

/** Python's `check_int`: an integer (not a float, not a boolean) in `[minimum, maximum]`. */
function checkInt(value: unknown, field: string, minimum: number, maximum?: number): number {
  const expected = maximum !== undefined ? `an integer in [${minimum}, ${maximum}]` : minimum === 1 ? "a positive integer" : `an integer >= ${minimum}`;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < minimum || (maximum !== undefined && value > maximum)) {
    throw new RangeError(`${field} must be ${expected}; got ${describe(value)}`);
  }
  return value;
}

/** Unpadded base64url text to bytes; the error names `field` (Python: `campaign.b64decode`). */
export function b64decode(text: unknown, field: string, size?: number): Uint8Array {
  if (typeof text !== "string" || text.includes("=")) throw new TypeError(`${field} must be unpadded base64url text; got ${describe(text)}`);
  if (text.length % 4 === 1 || [...text].some((c) => !B64URL.includes(c))) throw new TypeError(`${field} is not base64url: ${describe(text)}`);
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let bits = 0;
  let buffer = 0;
  let at = 0;
  for (const c of text) {
    buffer = (buffer << 6) | B64URL.indexOf(c);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (buffer >> bits) & 0xff;
    }
  }
  if (size !== undefined && out.length !== size) throw new RangeError(`${field} must be ${size} bytes; got ${out.length} (${describe(text)})`);
  return out;
}

/** The two-share Prio3 of a `vdaf` object (Python: `vdaf_from_config`); throws naming the field. */
export function vdafFromConfig(vdaf: unknown, field = "vdaf"): { type: string; params: Record<string, number>; prio3: Prio3<never> } {
  if (!isObject(vdaf)) throw new TypeError(`${field} must be a JSON object; got ${describe(vdaf)}`);
  const kind = vdaf.type;
  const expected = typeof kind === "string" && Object.hasOwn(VDAF_PARAMETERS, kind) ? (VDAF_PARAMETERS[kind] as readonly string[]) : undefined;
  if (expected === undefined) {
    throw new TypeError(`${field}.type must be one of ${Object.keys(VDAF_PARAMETERS).join(", ")}; got ${describe(kind)}`);
  }
  const given = Object.keys(vdaf).filter((k) => k !== "type").sort();
  if (given.join(",") !== [...expected].sort().join(",")) {
    throw new TypeError(`${field} ${String(kind)} takes ${JSON.stringify(expected)}; got ${JSON.stringify(given)}`);
  }
  const params: Record<string, number> = {};
  for (const name of expected) params[name] = checkInt(vdaf[name], `${field}.${name}`, 1);
  const p = (name: string): number => params[name] as number;
  try {
    const prio3 =
      kind === "count"
        ? new Prio3Count(2)
        : kind === "sum"
          ? new Prio3Sum(2, p("max_measurement"))
          : kind === "histogram"
            ? new Prio3Histogram(2, p("length"), p("chunk_length"))
            : kind === "multihotcountvec"
              ? new Prio3MultihotCountVec(2, p("length"), p("max_weight"), p("chunk_length"))
              : new Prio3SumVec(2, p("length"), p("max_measurement"), p("chunk_length"));
    return { type: kind as string, params, prio3: prio3 as Prio3<never> };
  } catch (error) {
    throw new RangeError(`${field}: ${(error as Error).message}`);
  }
}

/** An `HpkeConfig` as the document writes it (the key in unpadded base64url). */
export function hpkeConfigToJson(config: HpkeConfig): Record<string, number | string> {
  return { id: config.id, kem_id: config.kemId, kdf_id: config.kdfId, aead_id: config.aeadId, public_key: base64Url(config.publicKey) };
}

/** The inverse of {@link hpkeConfigToJson}: DAP's one suite only; throws naming the field. */
export function hpkeConfigFromJson(document: unknown, field: string): HpkeConfig {
  if (!isObject(document) || Object.keys(document).sort().join(",") !== [...HPKE_FIELDS].sort().join(",")) {
    throw new TypeError(`${field} must be an object with exactly ${JSON.stringify(HPKE_FIELDS)}`);
  }
  const id = checkInt(document.id, `${field}.id`, 0, 255);
  const [kemId, kdfId, aeadId] = (["kem_id", "kdf_id", "aead_id"] as const).map((name) => checkInt(document[name], `${field}.${name}`, 0, 0xffff)) as [number, number, number];
  try {
    checkSuite(kemId, kdfId, aeadId);
  } catch (error) {
    throw new HpkeError(`${field}: ${(error as Error).message}`);
  }
  return { id, kemId, kdfId, aeadId, publicKey: b64decode(document.public_key, `${field}.public_key`, X25519_KEY_SIZE) };
}

function endpoint(value: unknown, field: string): string {
  if (typeof value !== "string" || !(value.startsWith("http://") || value.startsWith("https://"))) {
    throw new TypeError(`${field} must be an http(s) URL; got ${describe(value)}`);
  }
  if (!/^[\x00-\x7f]*$/.test(value)) throw new TypeError(`${field} must be ASCII; got ${describe(value)}`);
  return `${value.replace(/\/+$/, "")}/`;
}

/** The canonical `dap` object of a parsed one (Python: `_Dap.canonical`). */
interface ParsedDap {
  readonly taskId: Uint8Array;
  readonly taskInfo: string;
  readonly leader: string;
  readonly helper: string;
  readonly vdafType: string;
  readonly vdafParams: Readonly<Record<string, number>>;
  readonly vdaf: Prio3<never>;
  readonly minBatchSize: number;
  readonly timePrecision: number;
  readonly dp: string;
  /** `"laplace:EPSILON"`'s EPSILON, `"gaussian:RHO"`'s RHO (`null` otherwise). */
  readonly centralEpsilon: number | null;
  readonly centralRho: number | null;
  readonly leaderHpkeConfig: HpkeConfig;
  readonly helperHpkeConfig: HpkeConfig;
}

function canonicalDap(dap: ParsedDap): Record<string, unknown> {
  return {
    task_id: base64Url(dap.taskId),
    task_info: dap.taskInfo,
    leader: dap.leader,
    helper: dap.helper,
    vdaf: { type: dap.vdafType, ...dap.vdafParams },
    min_batch_size: dap.minBatchSize,
    time_precision: dap.timePrecision,
    dp: dap.dp,
    leader_hpke_config: hpkeConfigToJson(dap.leaderHpkeConfig),
    helper_hpke_config: hpkeConfigToJson(dap.helperHpkeConfig),
  };
}

function parseDap(dap: unknown): ParsedDap {
  if (!isObject(dap)) throw new TypeError(`dap must be a JSON object; got ${describe(dap)}`);
  const missing = DAP_FIELDS.filter((name) => !Object.hasOwn(dap, name));
  const unknown = Object.keys(dap).filter((name) => !(DAP_FIELDS as readonly string[]).includes(name)).sort();
  if (missing.length || unknown.length) {
    throw new TypeError(`dap needs exactly ${JSON.stringify(DAP_FIELDS)}; missing ${JSON.stringify(missing)}, unknown ${JSON.stringify(unknown)}`);
  }
  const taskInfo = dap.task_info;
  if (typeof taskInfo !== "string") throw new TypeError(`dap.task_info must be text; got ${describe(taskInfo)}`);
  const vdaf = vdafFromConfig(dap.vdaf, "dap.vdaf");
  const { kind: dpKind, parameter } = dpParameter(dap.dp, "dap.dp");
  const dpValue = parameter === null ? null : parameter.toNumber();
  return {
    taskId: b64decode(dap.task_id, "dap.task_id", TASK_ID_SIZE),
    taskInfo,
    leader: endpoint(dap.leader, "dap.leader"),
    helper: endpoint(dap.helper, "dap.helper"),
    vdafType: vdaf.type,
    vdafParams: vdaf.params,
    vdaf: vdaf.prio3,
    minBatchSize: checkInt(dap.min_batch_size, "dap.min_batch_size", 1),
    timePrecision: checkInt(dap.time_precision, "dap.time_precision", 1),
    dp: String(dap.dp),
    centralEpsilon: dpKind === "laplace" ? dpValue : null,
    centralRho: dpKind === "gaussian" ? dpValue : null,
    leaderHpkeConfig: hpkeConfigFromJson(dap.leader_hpke_config, "dap.leader_hpke_config"),
    helperHpkeConfig: hpkeConfigFromJson(dap.helper_hpke_config, "dap.helper_hpke_config"),
  };
}

/**
 * A `local` config: a canonical grr with k the histogram's length (2 for a count), or a sue/oue
 * with k the multihotcountvec's length and max_weight (required there: every bit vector is a
 * possible report, so a smaller max_weight would refuse honest ones).
 */
function parseLocal(local: JsonValue | undefined, dap: ParsedDap): LocalConfig | null {
  const allowed = Object.hasOwn(LOCAL_MECHANISMS, dap.vdafType) ? LOCAL_MECHANISMS[dap.vdafType] : undefined;
  if (local === undefined || local === null) {
    if (dap.vdafType === "multihotcountvec") throw new TypeError(`local is required before a multihotcountvec task (a sue or oue config with k = its length); got ${describe(local)}`);
    return null;
  }
  if (allowed === undefined) {
    throw new RangeError(`local randomization is for histogram, count and multihotcountvec tasks; this is ${dap.vdafType}`);
  }
  const k = dap.vdafParams.length ?? 2;
  const mechanism = isObject(local) ? local.mechanism : undefined;
  if (!isObject(local) || !(allowed as readonly unknown[]).includes(mechanism) || local.k !== k) {
    throw new TypeError(
      `local must be a ${allowed.join(" or ")} config with k = ${k} before a ${dap.vdafType} task; got ${describe(isObject(local) ? local.mechanism : local)} with k ${describe(isObject(local) ? local.k : undefined)}`,
    );
  }
  const weight = dap.vdafParams.max_weight ?? k;
  if (weight !== k) throw new RangeError(`dap.vdaf.max_weight must equal length (${k}) before a ${String(mechanism)} local; got ${weight}`);
  const extra = Object.keys(local).filter((key) => !["mechanism", "epsilon", "k"].includes(key)).sort();
  if (extra.length) throw new TypeError(`local is not canonical: a ${String(mechanism)} config has exactly mechanism, epsilon and k; got also ${JSON.stringify(extra)}`);
  const epsilon = local.epsilon instanceof JsonFloat ? local.epsilon.value : local.epsilon;
  if (typeof epsilon !== "number" || !(epsilon > 0) || !Number.isFinite(epsilon)) {
    throw new RangeError(`local: epsilon must be a positive finite number; got ${describe(local.epsilon)}`);
  }
  return { mechanism: mechanism as LocalMechanism, epsilon, k };
}

function parseDomain(domain: JsonValue | undefined, dap: ParsedDap): readonly string[] | null {
  if (dap.vdafType !== "histogram" && dap.vdafType !== "multihotcountvec") {
    if (domain !== undefined && domain !== null) throw new TypeError(`domain is only for histogram and multihotcountvec tasks; this is ${dap.vdafType}`);
    return null;
  }
  const length = dap.vdafParams.length as number;
  if (!Array.isArray(domain) || domain.length !== length) throw new TypeError(`domain must list the task's ${length} labels`);
  if (!domain.every((label) => typeof label === "string") || new Set(domain).size !== length) throw new TypeError("domain labels must be distinct strings");
  return domain as string[];
}

/** Python's `parse_metadata`: the unhashed metadata fields, checked. */
function checkMetadata(document: JsonObject): void {
  for (const field of METADATA_TEXT) {
    const value = document[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== "string" || value.trim() === "" || value.length > MAX_TEXT_LENGTH) {
      throw new TypeError(`${field} must be non-empty text of at most ${MAX_TEXT_LENGTH} characters; got ${describe(value)}`);
    }
  }
  const expires = document.expires;
  if (expires !== undefined && expires !== null) {
    const match = typeof expires === "string" ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(expires) : null;
    if (match === null) throw new TypeError(`expires must be an ISO date YYYY-MM-DD; got ${describe(expires)}`);
    const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
    const date = new Date(Date.UTC(year, month - 1, day));
    if (year < 1 || date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) {
      throw new RangeError(`expires is not a calendar date; got ${describe(expires)}`);
    }
  }
  const retention = document.retention_days;
  if (retention !== undefined && retention !== null) checkInt(retention, "retention_days", 1, Number.MAX_SAFE_INTEGER);
}

/** What a secure-aggregation campaign's `config_id` hashes (docs/dap.md). */
export function dapCampaignContent(document: JsonObject): Record<string, unknown> {
  return { dap: document.dap, local: document.local ?? null, domain: document.domain ?? null, policy: document.policy ?? null };
}

/** A verified secure-aggregation campaign, as the client uses it (Python: `DapCampaign`). */
export class DapCampaign implements DapClaim {
  /** The local epsilon of one report (`Infinity` without `local`). */
  readonly localEpsilon: number;
  readonly leaderKey: string;
  readonly helperKey: string;
  readonly #index: ReadonlyMap<string, number>;

  constructor(
    readonly name: string,
    readonly configId: string,
    readonly task: DapTask<never>,
    readonly vdafType: string,
    readonly vdafParams: Readonly<Record<string, number>>,
    readonly leader: string,
    readonly helper: string,
    /** The task's `dp` as the document writes it. */
    readonly dp: string,
    /** `"laplace:EPSILON"`'s EPSILON (pure DP), else `null`. */
    readonly centralEpsilon: number | null,
    /** `"gaussian:RHO"`'s RHO (zCDP), else `null`. */
    readonly centralRho: number | null,
    /** The grr config randomizing the index (or bit) before sharding, or the sue/oue whose bit vector is sharded; `null`: none. */
    readonly local: LocalConfig | null,
    readonly domain: readonly string[] | null,
    readonly policy: BudgetPolicy | null,
    /** The document as JSON text (what the device caches). */
    readonly text: string,
  ) {
    this.localEpsilon = local === null ? Infinity : local.epsilon;
    this.leaderKey = base64Url(task.leaderHpkeConfig.publicKey);
    this.helperKey = base64Url(task.helperHpkeConfig.publicKey);
    this.#index = new Map((domain ?? []).map((label, i) => [label, i]));
  }

  get hasLocal(): boolean {
    return this.local !== null;
  }

  /** `local`'s mechanism name (what the app's `allowed_mechanisms` must allow), or `null`. */
  get localMechanism(): LocalMechanism | null {
    return this.local === null ? null : this.local.mechanism;
  }

  /**
   * The Aggregators' central epsilon of one collection at `delta` (Python: `central_epsilon_at`):
   * EPSILON for `laplace` (pure DP, any delta), rho-zCDP converted at `delta` for `gaussian`
   * ({@link zcdpEpsilon}), infinite for `none`.
   */
  centralEpsilonAt(delta: number): number {
    if (this.centralEpsilon !== null) return this.centralEpsilon;
    if (this.centralRho !== null) return zcdpEpsilon(this.centralRho, delta);
    return Infinity;
  }

  /**
   * What one report costs the ledger: the smaller of its local epsilon and the central epsilon
   * at `delta`, the app's `max_central_delta` (docs/dap.md, "What record does"; Python: `charge_at`).
   */
  chargeAt(delta: number): number {
    return Math.min(this.localEpsilon, this.centralEpsilonAt(delta));
  }

  /**
   * The Prio3 measurements of recorded values (before `local`, which randomizes a histogram's
   * or a multihotcountvec's index, or a count's bit) and how many were clipped to `[0, max_measurement]`. The error names
   * the position and the value's type, never the value.
   */
  measurements(values: readonly unknown[]): { measurements: (number | number[])[]; clipped: number } {
    const out: (number | number[])[] = [];
    let clipped = 0;
    const top = this.vdafParams.max_measurement ?? 1;
    const clip = (value: unknown, where: string): [number, number] => {
      if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new TypeError(`${where} must be an integer (or list of integers)`);
      return [Math.min(Math.max(value, 0), top), value < 0 || value > top ? 1 : 0];
    };
    values.forEach((value, position) => {
      const where = `the value at position ${position} (${describe(value)}) of campaign ${JSON.stringify(this.name)}`;
      if (this.vdafType === "count") {
        if (typeof value === "boolean" || value === 0 || value === 1) {
          out.push(Number(value));
          return;
        }
        throw new TypeError(`${where} must be true or false`);
      }
      if (this.vdafType === "histogram" || this.vdafType === "multihotcountvec") {
        const index = typeof value === "string" ? this.#index.get(value) : undefined;
        if (index === undefined) throw new TypeError(`${where} is not a label of its domain (${this.#index.size} labels)`);
        out.push(index);
        return;
      }
      if (this.vdafType === "sum") {
        const [number, over] = clip(value, where);
        out.push(number);
        clipped += over;
        return;
      }
      const length = this.vdafParams.length as number;
      if (!Array.isArray(value)) throw new TypeError(`${where} must be a list of ${length} integers`);
      if (value.length !== length) throw new RangeError(`${where} must have ${length} entries; got ${value.length}`);
      const vector = value.map((v: unknown) => clip(v, where));
      out.push(vector.map(([number]) => number));
      clipped += vector.some(([, over]) => over) ? 1 : 0;
    });
    return { measurements: out, clipped };
  }

  /**
   * What is sharded (Python: `prio3_measurement`): a count's bit as a boolean, a unary
   * encoding's report (a packed row, most significant bit first) as its k booleans for
   * MultihotCountVec, anything else as it is.
   */
  prio3Measurement(measurement: number | number[] | Uint8Array): number | boolean | number[] | boolean[] {
    if (this.vdafType === "multihotcountvec") {
      if (!(measurement instanceof Uint8Array)) throw new TypeError(`campaign ${this.name}: a multihotcountvec measurement is a unary report (Uint8Array); got ${describe(measurement)}`);
      const k = this.vdafParams.length as number;
      return Array.from({ length: k }, (_, i) => (((measurement[i >> 3] as number) >> (7 - (i & 7))) & 1) === 1);
    }
    if (measurement instanceof Uint8Array) throw new TypeError(`campaign ${this.name}: a packed report is only for multihotcountvec`);
    return this.vdafType === "count" ? Boolean(measurement) : measurement;
  }

  /**
   * What `record` shards for `values` (Python: `TelemetryClient._record_dap`): the measurements,
   * the index (or bit) randomized first by `local` (the campaign's grr, built by the caller's
   * mechanism factory) with words from `rng`; and how many values were clipped.
   */
  sharded(values: readonly unknown[], local: Mechanism | null, rng: WordSource): { measurements: (number | boolean | number[] | boolean[])[]; clipped: number } {
    const { measurements, clipped } = this.measurements(values);
    if ((local === null) !== (this.local === null)) throw new Error(`campaign ${this.name}: the local mechanism given does not match the document's`);
    // grr's reports are indices, sue/oue's packed bit rows (Uint8Array)
    const randomized = local === null ? measurements : (local.perturb(measurements, { rng }) as (number | Uint8Array)[]);
    return { measurements: randomized.map((m) => this.prio3Measurement(m)), clipped };
  }

  /**
   * One sealed report of a measurement (docs/dap.md, "What record does"): its id (the DAP
   * report id, 32 hex) and the outbox's payload, the encoded `Report` in unpadded base64url.
   * Report id, Prio3 rand and HPKE ephemeral keys from the platform CSPRNG (`options` are for
   * tests), never from an injected word source: two devices seeded alike would collide.
   */
  async report(measurement: number | boolean | number[] | boolean[], now: number, options: Omit<PrepareOptions, "now"> = {}): Promise<{ id: string; payload: string }> {
    const report = await prepareReport(this.task, measurement as never, { ...options, now });
    const id = Array.from(report.reportMetadata.reportId, (b) => b.toString(16).padStart(2, "0")).join("");
    return { id, payload: base64Url(encodeReport(report)) };
  }
}

/**
 * Verify a secure-aggregation campaign document (its JSON text, or an object from
 * {@link parseJson}) named `name`: valid, in canonical form, its `config_id` the hash of its
 * content. Throws naming the field (Python: `DapCampaign.from_document`).
 */
export function parseDapCampaign(input: string | object, name?: string): DapCampaign {
  let parsed: JsonValue;
  if (typeof input === "string") {
    if (new TextEncoder().encode(input).length > MAX_DOCUMENT_BYTES) throw new RangeError(`the campaign document is larger than ${MAX_DOCUMENT_BYTES} bytes; refused unread`);
    parsed = parseJson(input);
  } else {
    parsed = input as JsonValue;
  }
  if (!isObject(parsed)) throw new TypeError(`a campaign must be a JSON object; got ${describe(parsed)}`);
  const document = parsed;
  const expectedName = name ?? document.name;
  if (document.name !== expectedName) throw new Error(`asked for campaign ${JSON.stringify(expectedName)}, got ${describe(document.name)}`);
  if (typeof expectedName !== "string" || !CAMPAIGN_NAME_PATTERN.test(expectedName)) throw new TypeError(`name is not a campaign name; got ${describe(expectedName)}`);
  const protocol = document.protocol ?? PROTOCOL_VERSION;
  if (protocol !== PROTOCOL_VERSION) throw new RangeError(`protocol must be ${PROTOCOL_VERSION}; got ${describe(protocol)}`);
  for (const refused of ["mechanism", "shuffle", "min_batch_size"]) {
    if (Object.hasOwn(document, refused)) {
      throw new TypeError(`a secure-aggregation campaign has no ${JSON.stringify(refused)} (its task's dap object says how reports are made and collected)`);
    }
  }
  const dap = parseDap(document.dap);
  const canonical = canonicalDap(dap);
  if (canonicalJson(canonical) !== canonicalJson(document.dap)) {
    throw new TypeError(`dap is not in canonical form (endpoints ending with '/', integers as integers, every field present): expected ${canonicalJson(canonical)}`);
  }
  const local = parseLocal(document.local, dap);
  const domain = parseDomain(document.domain, dap);
  const policy = document.policy ?? null;
  const budget = policy === null ? null : budgetPolicy(policy, "policy");
  // The ledger charges min(local, central) and refuses one above epsilon_per_report: such a
  // campaign would collect nothing. A gaussian task's central epsilon depends on the device's
  // max_central_delta (any epsilon > 0 is reached at some delta): only laplace or local is checked.
  if (budget !== null && dap.centralRho === null) {
    const charge = Math.min(local === null ? Infinity : local.epsilon, dap.centralEpsilon ?? Infinity);
    if (charge > budget.epsilon_per_report * (1 + BUDGET_TOLERANCE)) {
      throw new RangeError(
        `policy.epsilon_per_report ${budget.epsilon_per_report} is below what a report costs (${charge}, the smaller of its local and central epsilon): devices would refuse every report`,
      );
    }
  }
  checkMetadata(document);
  const expected = configId(dapCampaignContent(document));
  if (document.config_id !== expected) throw new Error(`config_id ${describe(document.config_id)} does not match the content (expected ${expected})`);
  const [vdafType, vdafConfig] = vdafConfiguration(dap.vdaf);
  const task: DapTask<never> = {
    taskId: dap.taskId,
    configuration: {
      taskInfo: new TextEncoder().encode(dap.taskInfo),
      leaderAggregatorEndpoint: dap.leader,
      helperAggregatorEndpoint: dap.helper,
      timePrecision: dap.timePrecision,
      minBatchSize: dap.minBatchSize,
      batchMode: BatchMode.TIME_INTERVAL,
      vdafType,
      vdafConfiguration: vdafConfig,
    },
    vdaf: dap.vdaf,
    leaderHpkeConfig: dap.leaderHpkeConfig,
    helperHpkeConfig: dap.helperHpkeConfig,
  };
  const text = typeof input === "string" ? input : canonicalJson(input);
  return new DapCampaign(expectedName, expected, task, dap.vdafType, dap.vdafParams, dap.leader, dap.helper, dap.dp, dap.centralEpsilon, dap.centralRho, local, domain, budget, text);
}
