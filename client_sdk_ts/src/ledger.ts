/**
 * The on-device privacy budget, sealed by a MAC chain (Python: `client_sdk.budget` and
 * `client_sdk.ledger_seal`; the same rules, stored as JSON texts instead of SQLite).
 *
 * Periods are aligned on the Unix epoch; within one, a campaign spends at most
 * `reports_per_period` charges and `epsilon_per_report * reports_per_period` epsilon. Time only
 * moves forward: a clock reading before the latest one stored counts as that time.
 *
 * Seal: row i carries `mac_i = HMAC-SHA256(K, "row" || mac_{i-1} || canonical(row_i))` with
 * `K = HMAC-SHA256(device secret, "ldp-telemetry/ledger-seal/v1")`; the head (rows, last MAC,
 * clock, lock-out) is MACed and kept twice, in the ledger and in a second entry written after it.
 * A device whose secret exists but whose ledger is missing, edited, or behind its head copy is
 * locked out: every budgeted report is refused until the current period of its campaign ends.
 * Someone holding the device secret can recompute every MAC; the seal turns loss and naive edits
 * into a refusal, never into a fresh budget.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { bytesToHex, hexToBytes } from "@noble/hashes/utils";
import { type BudgetPolicy, canonicalJson } from "./config.js";

/** Float slack when summing epsilons (ten reports of 0.1 fit a budget of 1.0). */
const RELATIVE_TOLERANCE = 1e-9;
const KEY_TAG = new TextEncoder().encode("ldp-telemetry/ledger-seal/v1");

/** A report the budget does not allow now; nothing was recorded. */
export class BudgetExceededError extends Error {
  override readonly name = "BudgetExceededError";
  constructor(
    readonly campaign: string,
    readonly reason: string,
    readonly spent: number,
    readonly limit: number,
    /** Unix seconds at which the period ends (`null`: waiting does not help). */
    readonly renewsAt: number | null,
  ) {
    super(
      `privacy budget of campaign ${JSON.stringify(campaign)} exceeded: ${reason} (spent ${spent.toPrecision(6)} of ` +
        `${limit.toPrecision(6)} epsilon this period; ` +
        (renewsAt === null ? "waiting for a new period does not help)" : `the period renews at ${new Date(renewsAt * 1000).toISOString()})`),
    );
  }
}

/** One line of the ledger: a spend (with its randomized payload) or a note. */
export interface LedgerRow {
  readonly id: number;
  readonly campaign: string;
  readonly at: number;
  readonly epsilon: number;
  readonly charged: 0 | 1;
  readonly report: string | null;
  readonly event: string | null;
  /** A memoized value's key, on the row that paid its epsilon_inf (absent otherwise). */
  readonly memo_key?: string;
  readonly mac: string;
}

interface Head {
  entries: number;
  chain: string;
  last_seen: number;
  lockout_since: number | null;
  lockout_reason: string | null;
}

interface Sealed {
  rows: LedgerRow[];
  head: Head;
  tag: string;
}

const epsilonPerPeriod = (rules: BudgetPolicy): number => rules.epsilon_per_report * rules.reports_per_period;

function period(now: number, rules: BudgetPolicy): [number, number] {
  const start = Math.floor(now / rules.period_seconds) * rules.period_seconds;
  return [start, start + rules.period_seconds];
}

/** The MACs of one device's ledger. */
class Seal {
  readonly #key: Uint8Array;
  constructor(secret: Uint8Array) {
    this.#key = hmac(sha256, secret, KEY_TAG);
  }
  mac(label: string, ...parts: Uint8Array[]): string {
    const h = hmac.create(sha256, this.#key);
    h.update(new TextEncoder().encode(label));
    for (const part of parts) h.update(part);
    return bytesToHex(h.digest());
  }
  get genesis(): string {
    return this.mac("genesis");
  }
  row(previous: string, row: Omit<LedgerRow, "mac">): string {
    const fields: unknown[] = [row.id, row.campaign, row.at, row.epsilon, row.charged, row.report, row.event];
    // sealed with its row, so that no one adds a memo key to get a value's reports for free;
    // rows without one keep the format they had before memo keys existed
    if (row.memo_key !== undefined) fields.push(row.memo_key);
    return this.mac("row", hexToBytes(previous), new TextEncoder().encode(canonicalJson(fields)));
  }
  headTag(head: Head): string {
    return this.mac("head", new TextEncoder().encode(canonicalJson(head)));
  }
}

/** The two stored texts of a ledger: the ledger itself and its head copy. */
export interface LedgerTexts {
  readonly ledger: string | null;
  readonly head: string | null;
}

/** The privacy ledger of one device (state in memory; the client persists {@link BudgetLedger.texts}). */
export class BudgetLedger {
  /** Why the stored ledger was found damaged on opening (`null`: it was not). */
  readonly damage: string | null;
  readonly #seal: Seal;
  readonly #clock: () => number;
  #rows: LedgerRow[];
  #head: Head;

  /**
   * Open the ledger from its stored texts. `expectExisting`: the device secret existed before,
   * so a ledger must too; its absence is damage, not a new device.
   */
  constructor(secret: Uint8Array, stored: LedgerTexts, options: { expectExisting: boolean; clock?: () => number }) {
    this.#seal = new Seal(secret);
    this.#clock = options.clock ?? (() => Date.now() / 1000);
    let damage: string | null = null;
    let sealed: Sealed | null = null;
    if (stored.ledger === null && stored.head === null) {
      damage = options.expectExisting ? "the ledger is missing" : null;
    } else if (stored.ledger === null || stored.ledger === "") {
      damage = "the ledger is missing or empty";
    } else {
      try {
        sealed = JSON.parse(stored.ledger) as Sealed;
        damage = this.#verify(sealed, stored.head);
      } catch {
        damage = "the ledger is unreadable";
      }
    }
    this.damage = damage;
    if (damage === null && sealed !== null) {
      this.#rows = sealed.rows;
      this.#head = sealed.head;
    } else {
      this.#rows = [];
      this.#head = { entries: 0, chain: this.#seal.genesis, last_seen: 0, lockout_since: null, lockout_reason: null };
      if (damage !== null) {
        this.#head.lockout_since = this.#now();
        this.#head.lockout_reason = damage;
      }
    }
  }

  #verify(sealed: Sealed, headText: string | null): string | null {
    if (headText === null) return "the ledger's head copy is missing";
    let copy: { head: Head; tag: string };
    try {
      copy = JSON.parse(headText) as { head: Head; tag: string };
    } catch {
      return "the ledger's head copy is unreadable";
    }
    if (copy === null || typeof copy !== "object" || this.#seal.headTag(copy.head) !== copy.tag) {
      return "the ledger's head copy fails verification";
    }
    if (!Array.isArray(sealed.rows) || this.#seal.headTag(sealed.head) !== sealed.tag) {
      return "the ledger's own head fails verification";
    }
    let chain = this.#seal.genesis;
    const macs = [chain];
    for (const row of sealed.rows) {
      chain = this.#seal.row(chain, row);
      if (row.mac !== chain) return `spend row ${row.id} fails verification`;
      macs.push(chain);
    }
    if (sealed.rows.length !== sealed.head.entries || chain !== sealed.head.chain) {
      return `the ledger holds ${sealed.rows.length} sealed rows, its head says ${sealed.head.entries}`;
    }
    const behind = copy.head.entries;
    if (behind > sealed.rows.length || macs[behind] !== copy.head.chain) {
      return `the ledger holds ${sealed.rows.length} rows, fewer than the ${behind} its head copy recorded (rows were lost)`;
    }
    if (copy.head.last_seen > sealed.head.last_seen) return "the ledger's clock is behind its head copy";
    if (copy.head.lockout_since !== sealed.head.lockout_since) return "the ledger's lock-out does not match its head copy";
    return null;
  }

  /** The texts to store: the ledger first, then its head copy (in this order). */
  texts(): [["ledger", string], ["ledger_head", string]] {
    const tag = this.#seal.headTag(this.#head);
    return [
      ["ledger", JSON.stringify({ rows: this.#rows, head: this.#head, tag })],
      ["ledger_head", JSON.stringify({ head: this.#head, tag })],
    ];
  }

  #now(): number {
    const reading = this.#clock();
    if (!Number.isFinite(reading)) throw new RangeError("the clock returned a non-finite time");
    return Math.max(reading, this.#head?.last_seen ?? 0);
  }

  #append(row: Omit<LedgerRow, "mac" | "id">): void {
    const full = { id: this.#rows.length + 1, ...row };
    const mac = this.#seal.row(this.#head.chain, full);
    this.#rows.push({ ...full, mac });
    this.#head.chain = mac;
    this.#head.entries += 1;
  }

  #totals(campaign: string, since: number): [number, number] {
    let spent = 0;
    let count = 0;
    for (const row of this.#rows) {
      if (row.campaign === campaign && row.charged === 1 && row.at >= since) {
        spent += row.epsilon;
        count += 1;
      }
    }
    return [spent, count];
  }

  /**
   * Record the spends of several reports of one campaign, all or nothing, or throw
   * {@link BudgetExceededError} and record nothing. `reports`: their wire payloads, for the log.
   * `memoKeys` (a memoized mechanism; Python: `budget.Charge.memo_key`): the first report of
   * each key pays `epsilon` (the mechanism's epsilon_inf, which may exceed `epsilon_per_report`
   * but not the period's total) and any later report of it, in any period, pays nothing
   * (Erlingsson, Pihur & Korolova, CCS 2014).
   */
  authorize(
    campaign: string,
    rules: BudgetPolicy,
    epsilon: number,
    reports: readonly unknown[],
    memoKeys?: readonly string[],
  ): void {
    if (memoKeys !== undefined && memoKeys.length !== reports.length) {
      throw new RangeError(`memoKeys must have one key per report (${reports.length}); got ${memoKeys.length}`);
    }
    const now = this.#now();
    const [start, renewsAt] = period(now, rules);
    let [spent, count] = this.#totals(campaign, start);
    const limit = epsilonPerPeriod(rules);
    if (this.#head.lockout_since !== null) {
      const [, lockoutEnds] = period(this.#head.lockout_since, rules);
      if (now < lockoutEnds) {
        throw new BudgetExceededError(
          campaign,
          `the privacy ledger was found damaged (${this.#head.lockout_reason}); this device sends no budgeted report until that period ends`,
          spent,
          limit,
          lockoutEnds,
        );
      }
    }
    const paid = new Set(this.#rows.filter((row) => row.campaign === campaign && row.memo_key !== undefined).map((row) => row.memo_key));
    const slack = RELATIVE_TOLERANCE * limit;
    const repeats: boolean[] = [];
    for (let i = 0; i < reports.length; i++) {
      const key = memoKeys?.[i];
      const repeat = key !== undefined && paid.has(key);
      repeats.push(repeat);
      if (repeat) continue;
      if (key === undefined && epsilon > rules.epsilon_per_report * (1 + RELATIVE_TOLERANCE)) {
        throw new BudgetExceededError(
          campaign,
          `a report of epsilon ${epsilon} exceeds the policy's epsilon_per_report ${rules.epsilon_per_report}`,
          spent,
          limit,
          null,
        );
      }
      if (count + 1 > rules.reports_per_period) {
        throw new BudgetExceededError(campaign, `${count} of ${rules.reports_per_period} charged reports already sent this period`, spent, limit, renewsAt);
      }
      if (spent + epsilon > limit + slack) {
        throw new BudgetExceededError(campaign, `this report would cost ${epsilon} more`, spent, limit, renewsAt);
      }
      if (key !== undefined) paid.add(key); // two reports of one new value in a batch pay once
      spent += epsilon;
      count += 1;
    }
    reports.forEach((report, i) => {
      const key = memoKeys?.[i];
      const row = { campaign, at: now, epsilon: repeats[i] ? 0 : epsilon, charged: repeats[i] ? 0 : 1, report: canonicalJson(report), event: null } as const;
      this.#append(key !== undefined && !repeats[i] ? { ...row, memo_key: key } : row);
    });
    this.#head.last_seen = now;
  }

  /** A line of the user-visible log that is not a report (costs nothing). */
  note(campaign: string, event: string): void {
    this.#append({ campaign, at: this.#now(), epsilon: 0, charged: 0, report: null, event });
  }

  /** Spent and remaining budget of `campaign` in the current period. */
  status(campaign: string, rules: BudgetPolicy): { spent: number; limit: number; charges: number; renewsAt: number } {
    const [start, renewsAt] = period(this.#now(), rules);
    const [spent, charges] = this.#totals(campaign, start);
    return { spent, limit: epsilonPerPeriod(rules), charges, renewsAt };
  }

  /** What this device sent under a budget, and what it noticed (oldest first). */
  history(campaign?: string): { campaign: string; hour: string; epsilon: number; report: unknown; event: string | null }[] {
    return this.#rows
      .filter((row) => campaign === undefined || row.campaign === campaign)
      .map((row) => ({
        campaign: row.campaign,
        hour: new Date(Math.floor(row.at / 3600) * 3600 * 1000).toISOString().slice(0, 16) + "Z",
        epsilon: row.epsilon,
        report: row.report === null ? null : JSON.parse(row.report),
        event: row.event,
      }));
  }
}
