/**
 * What `TelemetryClient` does with a secure-aggregation campaign (docs/dap.md, "The device";
 * Python: `TelemetryClient._record_dap`, `_flush_dap`, `_settle_dap`): the policy check, the
 * reports `record` queues, the upload to the Leader and the settling of its answer. The client
 * loads this module (with Prio3 and HPKE: the `dap` chunk of the browser bundle) the first time
 * it meets a document with a `"dap"` object, so a page without secure aggregation never does.
 */
import { checkUrl } from "../client.js";
import type { BudgetPolicy } from "../config.js";
import type { BudgetLedger } from "../ledger.js";
import type { Mechanism, MechanismConfig } from "../mechanisms/types.js";
import type { PrivacyPolicy } from "../policy.js";
import type { WordSource } from "../words.js";
import { base64Url } from "../wire.js";
import { b64decode, type DapCampaign, parseDapCampaign } from "./campaign.js";
import { DapCodecError, MEDIA_TYPE_PREFIX } from "./messages.js";
import { checkDapPolicy } from "./policy.js";

/** `ReportError` (DAP-18, Section 4.1) by code: why the Leader refused one report of an upload. */
export const REPORT_ERRORS: readonly string[] = [
  "reserved",
  "batch_collected",
  "report_replayed",
  "report_dropped",
  "hpke_unknown_config_id",
  "hpke_decrypt_error",
  "vdaf_verify_error",
  "task_expired",
  "invalid_message",
  "report_too_early",
  "task_not_started",
  "outdated_config",
];
/** The media type of an `UploadRequest` (DAP-18, "Uploading Reports"; Python: `UploadRequest.MEDIA_TYPE`). */
export const UPLOAD_MEDIA_TYPE = `${MEDIA_TYPE_PREFIX}upload-req`;

/** A queued report as the driver reads it (the client's outbox item). */
interface QueuedReport {
  readonly id: string;
  readonly payload: unknown;
}

/** A verified secure-aggregation campaign as the client holds it (beside its mechanism campaigns). */
export interface DapEntry {
  readonly dap: DapDriver;
  readonly document: { readonly name: string; readonly configId: string; readonly text: string; readonly policy: BudgetPolicy | null };
}

/**
 * Verify a secure-aggregation campaign document (`parseDapCampaign`) and build its `local` (grr, sue or oue)
 * with the client's mechanism factory (in browsers, the categorical chunk).
 */
export async function dapEntry(
  input: string | object,
  name: string | undefined,
  mechanisms: (config: MechanismConfig) => Mechanism | Promise<Mechanism>,
  allowInsecureHttp: boolean,
): Promise<DapEntry> {
  const campaign = parseDapCampaign(input, name);
  const local = campaign.local === null ? null : await mechanisms(campaign.local);
  const driver = new DapDriver(campaign, local, allowInsecureHttp);
  return { dap: driver, document: { name: campaign.name, configId: campaign.configId, text: campaign.text, policy: campaign.policy } };
}

/** The client's operations on one secure-aggregation campaign. */
export class DapDriver {
  constructor(
    readonly campaign: DapCampaign,
    /** The campaign's `local` (grr, or sue/oue before a multihotcountvec task), or `null`. */
    readonly local: Mechanism | null,
    readonly allowInsecureHttp: boolean,
  ) {}

  /**
   * The app's policy ({@link checkDapPolicy}: `PolicyViolation`), then the Leader's URL: https,
   * or http to loopback unless the client allows insecure http (Python: `_check_policy`).
   */
  checkPolicy(policy: PrivacyPolicy): void {
    checkDapPolicy(policy, this.campaign);
    try {
      checkUrl(this.campaign.leader, "URL", this.allowInsecureHttp);
    } catch (error) {
      throw new Error(`campaign ${this.campaign.name}: the Leader's ${(error as Error).message}`);
    }
  }

  /**
   * What `record` queues for `values` (docs/dap.md, "What record does"): the measurements (after
   * `local` with words from `rng`), each sharded and sealed to both Aggregators at time `now`,
   * and authorized by the ledger at the campaign's charge, min(local, central) epsilon (a gaussian
   * task's central epsilon at the app's `max_central_delta`: the ledger adds epsilons, a valid if
   * looser account than adding rho), under
   * the stricter of the campaign's and the app's budget. `[items, clipped]`; nothing is queued here.
   */
  async record(values: readonly unknown[], rng: WordSource, now: number, policy: PrivacyPolicy, ledger: BudgetLedger): Promise<[{ id: string; payload: string }[], number]> {
    const campaign = this.campaign;
    const { measurements, clipped } = campaign.sharded(values, this.local, rng);
    const items: { id: string; payload: string }[] = [];
    for (const measurement of measurements) items.push(await campaign.report(measurement, now));
    const budget = policy.effectiveBudget(campaign.policy);
    if (budget !== null && items.length) {
      ledger.authorize(
        campaign.name,
        budget,
        campaign.chargeAt(policy.max_central_delta),
        items.map((item) => ({ dap_report: item.id })),
      );
    }
    return [items, clipped];
  }

  /** Where and how the reports go: `POST {leader}tasks/{task_id}/reports` (docs/dap.md, "Upload and answers"). */
  get upload(): [string, Record<string, string>] {
    return [`${this.campaign.leader}tasks/${base64Url(this.campaign.task.taskId)}/reports`, { "Content-Type": UPLOAD_MEDIA_TYPE }];
  }

  /** An `UploadRequest` of queued reports: their encodings back to back. */
  uploadBody(batch: readonly QueuedReport[]): Uint8Array<ArrayBuffer> {
    const reports = batch.map((q, i) => b64decode(q.payload, `queued report ${i}`));
    const out = new Uint8Array(reports.reduce((sum, r) => sum + r.length, 0));
    let at = 0;
    for (const report of reports) {
      out.set(report, at);
      at += report.length;
    }
    return out;
  }

  /**
   * The `pagehide` flush of this campaign (`TelemetryClient.flushOnExit`): the first of `queued`
   * whose encoded Reports fit in `budget` bytes, in one `UploadRequest` to the Leader with
   * `fetch(..., {keepalive: true})`, its answer unread. They stay queued: the next flush sends
   * them again and the Leader answers `report_replayed`, counted as delivered. `[budget, sent]`
   * after this campaign: the bytes left, and `sent` plus the reports sent.
   */
  keepalive(queued: readonly QueuedReport[], budget: number, sent: number, fetch: typeof globalThis.fetch): [number, number] {
    let size = 0;
    let count = 0;
    for (const q of queued) {
      const bytes = b64decode(q.payload, `queued report ${count}`).length;
      if (size + bytes > budget) break;
      size += bytes;
      count += 1;
    }
    if (count) {
      const [url, headers] = this.upload;
      fetch(url, { method: "POST", headers, body: this.uploadBody(queued.slice(0, count)), keepalive: true }).catch(() => undefined);
    }
    return [budget - size, sent + count];
  }

  /**
   * Settle the Leader's `UploadErrors` (`body`) for the reports `sent`: a report it does not
   * list was stored; `report_replayed` was stored by an earlier upload (a retry);
   * `report_too_early` stays queued (the device's clock is ahead); any other error can never be
   * delivered: the report is dropped and counted as `dap:<error>` (`drop`). `retain` keeps the
   * queued reports it accepts. `[delivered, any too early]`; throws when the body does not
   * decode or names a report not sent.
   */
  settle(sent: readonly QueuedReport[], body: Uint8Array, drop: (reason: string, count: number) => void, retain: (keep: (q: QueuedReport) => boolean) => void): [number, boolean] {
    const errors = uploadErrors(body);
    const ids = new Set(sent.map((q) => q.id));
    if (![...errors.keys()].every((id) => ids.has(id))) throw new DapCodecError(`campaign ${this.campaign.name}: the Leader's UploadErrors names reports not sent`);
    const done = new Set<string>();
    let delivered = 0;
    let early = false;
    for (const { id } of sent) {
      const refused = errors.get(id);
      if (refused === "report_too_early") {
        early = true;
        continue;
      }
      done.add(id);
      if (refused === undefined || refused === "report_replayed") delivered += 1;
      else drop(`dap:${refused}`, 1);
    }
    retain((q) => !done.has(q.id));
    return [delivered, early];
  }
}

/**
 * The Leader's `UploadErrors`: report id (32 hex) -> the error's name (`report_replayed`, ...);
 * throws naming the offset when the body does not decode.
 */
export function uploadErrors(body: Uint8Array): Map<string, string> {
  const size = 17; // ReportUploadStatus: id[16], error (uint8)
  if (body.length % size !== 0) throw new DapCodecError(`unreadable UploadErrors from the Leader: ${body.length} bytes is not a whole number of ${size}-byte statuses`);
  const out = new Map<string, string>();
  for (let at = 0; at < body.length; at += size) {
    const id = Array.from(body.subarray(at, at + 16), (b) => b.toString(16).padStart(2, "0")).join("");
    const code = body[at + 16] as number;
    const error = REPORT_ERRORS[code];
    if (error === undefined) throw new DapCodecError(`unreadable UploadErrors from the Leader: status.error at offset ${at + 16} is an unknown ReportError (${code})`);
    out.set(id, error);
  }
  return out;
}
