/**
 * `TelemetryClient`: record values on the device, randomized at once, and upload them later
 * (Python: `client_sdk.client`; docs/protocol.md, "Reports, upload and answers").
 *
 *     const client = new TelemetryClient("https://collector.example", { storage: new IndexedDBStorage() });
 *     await client.record("app-theme", "dark");   // randomized now; only the report is queued
 *     await client.flush();                        // number acknowledged; never throws for the network
 *
 * A value becomes a report at once (the app's policy checked first, then the budget ledger);
 * the report gets a random 128-bit id and waits in the outbox until the collector acknowledges
 * it (accepted or duplicate), so a retry never stores a report twice. Network errors, 408, 429
 * and 5xx are retried with backoff and jitter, honouring `Retry-After`; other 4xx are not.
 *
 * Secure-aggregation campaigns (a document with a `"dap"` object, docs/dap.md "The device"):
 * the app's policy must trust both Aggregators by URL and key (`checkDapPolicy`);
 * `record` shards the value with Prio3 (after the campaign's `local` grr, if any) and seals both
 * shares, the ledger charges min(local, central) epsilon per report, and only the encoded
 * `Report` enters the outbox; `flush` posts them to the Leader as one `UploadRequest` with the
 * same retries, and settles DAP's per-report errors: `report_too_early` kept, `report_replayed`
 * delivered (a retry), any other dropped and counted as `dap:<error>`. The DAP code (Prio3, HPKE)
 * is loaded the first time such a campaign is met (a chunk of its own in browsers).
 */
import { type CampaignDocument, describe, MAX_DOCUMENT_BYTES, parseCampaignDocument } from "./config.js";
import type { DapEntry } from "./dap/driver.js";
import { BudgetExceededError, BudgetLedger } from "./ledger.js";
import { mechanismNowOrLater } from "./mechanisms/loader.js";
import type { Mechanism, MechanismConfig, ValueKind } from "./mechanisms/types.js";
import { DEFAULT_POLICY, PolicyViolation, type PrivacyClaim, PrivacyPolicy } from "./policy.js";
import { registerAmplification } from "./policy.js";
import { MemoryStorage, type StateStorage } from "./storage.js";
import { DeviceKeys, memoScope } from "./memoization.js";
import type { SealingKey } from "./sealing-size.js";
import { CryptoWordSource, type WordSource } from "./words.js";

export { BudgetExceededError, PolicyViolation };

/** Statuses retried within a flush (Python: `transport.RETRY_STATUSES`). */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504]);
/** Seconds before the flush after the first failed one; doubles with each failure. */
export const BACKOFF_BASE = 1.0;
/** The longest backoff between flushes (and the longest `Retry-After` kept), seconds. */
export const BACKOFF_MAX = 3600.0;
/** The longest `Retry-After` honoured inside one flush, seconds. */
const MAX_RETRY_AFTER = 120;
/** The browser's budget for the bodies of all pending keepalive requests. */
export const KEEPALIVE_BYTES = 64 * 1024;
const PROBLEM_PREFIX = "urn:ldp-telemetry:problem:";
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

/** A queued report: its id, campaign and config, and the randomized payload (never a raw value). */
interface Queued {
  /** The stored segment it lives in (one per `recordMany` call; see `#stateTexts`). */
  readonly segment: number;
  readonly id: string;
  readonly campaign: string;
  readonly config_id: string;
  readonly payload: unknown;
}

/** The options of {@link TelemetryClient}. */
export interface TelemetryClientOptions {
  /** The app's privacy policy (default: {@link DEFAULT_POLICY}). */
  policy?: PrivacyPolicy;
  /** Where state lives (default: memory; `IndexedDBStorage` in browsers, `FolderStorage` in Node). */
  storage?: StateStorage;
  /** Campaign documents the app ships (their JSON text, or objects), pinned and checked at once. */
  campaigns?: ReadonlyArray<string | object>;
  /**
   * The anonymizing shuffler (`ldp-shuffler`): a shuffled campaign's reports are sealed to the
   * collector's key and sent there only, never to the collector directly.
   */
  shufflerUrl?: string;
  /** This install's shuffler credential, sent to the shuffler only as `Authorization: Bearer`. */
  shufflerToken?: string;
  /** Randomness for `perturb` (default: the platform CSPRNG); tests pass an `HmacWordSource`. */
  rng?: WordSource;
  /** Reports per upload request (default 500). */
  batchSize?: number;
  /** Retries per request (default 5). */
  retries?: number;
  /** The longest one flush may take, retries included, seconds (default 120). */
  flushDeadline?: number;
  /** Accept plain http to hosts that are not loopback. */
  allowInsecureHttp?: boolean;
  /**
   * The mechanism factory (default: this package's, which loads a mechanism group's code the
   * first time a campaign needs it; in Node through index.ts every group is loaded already).
   */
  mechanisms?: (config: MechanismConfig) => Mechanism | Promise<Mechanism>;
  /** `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /** Unix seconds (tests inject one). */
  clock?: () => number;
  /** Add a `pagehide` listener that sends queued reports with `fetch(..., {keepalive: true})` (browsers; default true). */
  flushOnPagehide?: boolean;
}

/** The last failed flush or campaign fetch, as `status()` reports it. */
export interface LastError {
  readonly at: number;
  readonly campaign: string | null;
  readonly type: string;
  readonly status: number | null;
  readonly message: string;
}

/** A verified campaign as the client uses it. */
interface Campaign {
  /** Set only on a secure-aggregation campaign ({@link DapEntry}). */
  readonly dap?: undefined;
  readonly document: CampaignDocument;
  readonly mechanism: Mechanism;
  /** How a shuffled campaign's payloads are sealed (`null`: not shuffled). */
  readonly sealing: SealingKey | null;
  readonly kind: ValueKind;
  readonly index: ReadonlyMap<string, number>;
  /** Memoized responses: `perturb` needs the keyed source, the ledger charges epsilon_inf per memo key. */
  readonly memoized: boolean;
  /** Whether `perturb` takes the device's keyed source (memoized draws, per-campaign device choices). */
  readonly keyed: boolean;
}

/** Either kind of verified campaign: randomized on the device, or aggregated by a DAP pair (src/dap/campaign.ts). */
type Entry = Campaign | DapEntry;

/** The most candidates a string campaign's domain lists (Python: `campaign.MAX_CANDIDATES`). */
const MAX_CANDIDATES = 10_000;
const VALUE_KINDS: ReadonlySet<string> = new Set<ValueKind>(["category", "number", "string", "record"]);

/** An upload or fetch that did not complete (kept for `status()`, never thrown to the app). */
class UploadError extends Error {
  override readonly name = "UploadError";
  constructor(
    message: string,
    readonly status: number | null = null,
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }
}

/** An http(s) URL: https, or plain http to loopback unless `allowInsecure`; throws naming `field`. */
export function checkUrl(url: unknown, field: string, allowInsecure: boolean): string {
  if (typeof url !== "string") throw new TypeError(`${field} must be an http(s) URL; got ${describe(url)}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`${field} must be an http(s) URL with a host`);
  }
  if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || parsed.hostname === "") {
    throw new TypeError(`${field} must be an http(s) URL with a host`);
  }
  const loopback = LOOPBACK.has(parsed.hostname) || parsed.hostname.startsWith("127.");
  if (parsed.protocol === "http:" && !loopback && !allowInsecure) {
    throw new Error(
      `${field} is plain http to a host that is not loopback (an insecure origin): reports would travel unauthenticated; use https or pass allowInsecureHttp`,
    );
  }
  return url.replace(/\/+$/, "");
}

/** `Retry-After` (seconds or an HTTP date) in seconds from now, or `null`. */
export function retryAfterSeconds(value: string | null): number | null {
  if (value === null) return null;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000);
}

/** The code of shuffled campaigns only (shuffled.ts: a chunk of its own in browsers), once loaded. */
type ShuffledCode = typeof import("./shuffled.js");
let shuffled: ShuffledCode | null = null;

/** Make the code of shuffled campaigns available at once (Node's index.ts, which has every module). */
export function registerShuffled(code: ShuffledCode): void {
  registerAmplification(code.AMPLIFICATION);
  shuffled = code;
}

function loadShuffled(): Promise<void> {
  return import("./shuffled.js").then(registerShuffled);
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Uniform in [0, 1) from the platform CSPRNG (jitter only: never noise). */
function uniform(): number {
  const word = new Uint32Array(1);
  globalThis.crypto.getRandomValues(word);
  return (word[0] as number) / 2 ** 32;
}

/** Records values under local differential privacy and uploads the randomized reports. */
export class TelemetryClient {
  readonly baseUrl: string;
  readonly shufflerUrl: string | null;
  readonly #shufflerHeaders: Record<string, string>;
  readonly policy: PrivacyPolicy;
  readonly storage: StateStorage;
  readonly batchSize: number;
  readonly retries: number;
  readonly flushDeadline: number;
  readonly #fetch: typeof fetch;
  readonly #mechanisms: (config: MechanismConfig) => Mechanism | Promise<Mechanism>;
  readonly #rng: WordSource;
  /** The device secret (Python: `secrets_store`): stored beside the ledger, never sent. */
  #secret: Uint8Array | null = null;
  readonly #clock: () => number;
  readonly #pinned = new Map<string, Entry>();
  readonly #campaigns = new Map<string, Entry>();
  readonly #allowInsecure: boolean;
  readonly #cached = new Map<string, string>(); // campaign -> its document's text
  readonly #changed = new Map<string, { accepted: string; served: string }>();
  readonly #closed = new Set<string>();
  readonly #dropped = new Map<string, Map<string, number>>();
  readonly #clipped = new Map<string, number>();
  /** Per campaign, the values a string mechanism sent as its reserved symbol (counts only). */
  readonly #reserved = new Map<string, number>();
  /** Per campaign, what the mechanism's `deviceCounters` counted (never sent). */
  readonly #counters = new Map<string, Map<string, number>>();
  #outbox: Queued[] = [];
  /** Segments whose stored text is out of date (written, or deleted when empty, by the next persist). */
  readonly #dirty = new Set<number>();
  #nextSegment = 0;
  #ledger: BudgetLedger | null = null;
  #ready: Promise<void>;
  #queue: Promise<unknown> = Promise.resolve();
  #storageError: string | null = null;
  #lastError: LastError | null = null;
  #failures = 0;
  #nextAttempt: number | null = null;

  constructor(baseUrl: string, options: TelemetryClientOptions = {}) {
    const crypto = (globalThis as { crypto?: Crypto }).crypto;
    if (crypto === undefined || typeof crypto.getRandomValues !== "function") {
      throw new Error(
        "ldp-telemetry needs crypto.getRandomValues (a secure context in browsers, Node 20 or later); it refuses to run without it",
      );
    }
    const allowInsecure = options.allowInsecureHttp ?? false;
    this.#allowInsecure = allowInsecure;
    this.baseUrl = checkUrl(baseUrl, "baseUrl", allowInsecure);
    this.shufflerUrl = options.shufflerUrl === undefined ? null : checkUrl(options.shufflerUrl, "shufflerUrl", allowInsecure);
    const token = options.shufflerToken;
    if (token !== undefined && (typeof token !== "string" || !/^[!-~]{1,256}$/.test(token))) {
      throw new TypeError(`shufflerToken must be the token the app operator issued (printable ASCII, no spaces, at most 256 characters); got ${describe(token)}`);
    }
    this.#shufflerHeaders = token === undefined ? {} : { Authorization: `Bearer ${token}` };
    const policy = options.policy ?? DEFAULT_POLICY;
    if (!(policy instanceof PrivacyPolicy)) throw new TypeError(`policy must be a PrivacyPolicy; got ${describe(policy)}`);
    this.policy = policy;
    this.storage = options.storage ?? new MemoryStorage();
    this.batchSize = options.batchSize ?? 500;
    if (!Number.isSafeInteger(this.batchSize) || this.batchSize < 1) throw new RangeError(`batchSize must be an integer of at least 1; got ${describe(options.batchSize)}`);
    this.retries = options.retries ?? 5;
    if (!Number.isSafeInteger(this.retries) || this.retries < 0) throw new RangeError(`retries must be a non-negative integer; got ${describe(options.retries)}`);
    this.flushDeadline = options.flushDeadline ?? 120;
    if (!(this.flushDeadline > 0)) throw new RangeError(`flushDeadline must be a positive number; got ${describe(options.flushDeadline)}`);
    const fetcher = options.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (fetcher === undefined) throw new Error("fetch is not available here: pass options.fetch");
    this.#fetch = fetcher.bind(globalThis);
    this.#rng = options.rng ?? new CryptoWordSource();
    this.#clock = options.clock ?? (() => Date.now() / 1000);
    this.#mechanisms = options.mechanisms ?? mechanismNowOrLater;
    const campaigns = options.campaigns ?? [];
    if (!Array.isArray(campaigns)) throw new TypeError(`campaigns must be an array of campaign documents; got ${describe(campaigns)}`);
    const pin = (campaign: Entry, i: number): void => {
      this.#checkAgainstPolicy(campaign);
      if (this.#pinned.has(campaign.document.name)) throw new Error(`campaigns[${i}]: campaign ${campaign.document.name} is pinned twice`);
      this.#pinned.set(campaign.document.name, campaign);
    };
    // A pinned campaign whose mechanism's code is still loading (a browser chunk) is checked
    // before any operation runs; a failed check then rejects every operation.
    const loading: Promise<void>[] = [];
    campaigns.forEach((input, i) => {
      const at = (error: unknown): Error => new Error(`campaigns[${i}]: ${(error as Error).message}`);
      let verified: Entry | Promise<Entry>;
      try {
        verified = this.#verify(input);
      } catch (error) {
        throw at(error);
      }
      if (verified instanceof Promise) {
        loading.push(verified.then((campaign) => pin(campaign, i), (error: unknown) => Promise.reject(at(error))));
      } else {
        pin(verified, i);
      }
    });
    this.#ready = loading.length ? Promise.all(loading).then(() => this.#load()) : this.#load();
    this.#ready.catch(() => undefined);
    const target = globalThis as { addEventListener?: (type: string, listener: () => void) => void };
    if ((options.flushOnPagehide ?? true) && typeof target.addEventListener === "function" && typeof (globalThis as { document?: unknown }).document === "object") {
      target.addEventListener("pagehide", () => this.flushOnExit());
    }
  }

  /** Run `work` after every earlier operation (one at a time, like Python's locks). */
  #serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(() => this.#ready).then(work);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #load(): Promise<void> {
    let secretText: string | null = null;
    let ledger: string | null = null;
    let head: string | null = null;
    let outbox: string | null = null;
    let campaigns: string | null = null;
    try {
      const keys = ["device_secret", "ledger", "ledger_head", "outbox", "campaigns"] as const;
      const texts = await Promise.all(keys.map((key) => this.storage.get(key)));
      [secretText, ledger, head, outbox, campaigns] = [texts[0] ?? null, texts[1] ?? null, texts[2] ?? null, texts[3] ?? null, texts[4] ?? null];
    } catch (error) {
      this.#storageError = `storage ${this.storage.kind} is unavailable (${(error as Error).name}); this client keeps its state in memory only`;
    }
    const existing = secretText !== null && /^[0-9a-f]{64}$/.test(secretText);
    const secret = new Uint8Array(32);
    if (existing) secret.set(Array.from({ length: 32 }, (_, i) => parseInt((secretText as string).slice(2 * i, 2 * i + 2), 16)));
    else globalThis.crypto.getRandomValues(secret);
    this.#secret = secret;
    this.#ledger = new BudgetLedger(secret, { ledger, head }, { expectExisting: existing, clock: this.#clock });
    try {
      for (const segment of outbox === null ? [] : (JSON.parse(outbox) as number[])) {
        this.#nextSegment = Math.max(this.#nextSegment, segment + 1);
        const text = await this.storage.get(`outbox_${segment}`);
        if (text !== null) this.#outbox.push(...(JSON.parse(text) as Queued[]));
      }
      for (const [name, text] of Object.entries(campaigns === null ? {} : (JSON.parse(campaigns) as Record<string, string>))) {
        this.#cached.set(name, text);
      }
    } catch (error) {
      // An unreadable outbox or cache loses queued reports (never budget: the ledger is apart).
      this.#storageError = `storage ${this.storage.kind} held an unreadable outbox or campaign cache (${(error as Error).name}); what could be read is kept`;
    }
    const writes: [string, string | null][] = [];
    if (!existing) writes.push(["device_secret", hex(secret)]);
    writes.push(...this.#ledger.texts());
    await this.#persist(writes);
  }

  /** Store entries (`null`: delete); on failure keep working in memory and say so in `status()`. */
  async #persist(entries: [string, string | null][]): Promise<void> {
    if (this.#storageError !== null) return;
    try {
      await this.storage.set(entries);
    } catch (error) {
      this.#storageError = `storage ${this.storage.kind} failed (${(error as Error).name}: full or unavailable); this client keeps its state in memory only from now on`;
    }
  }

  /**
   * What changed, to store: the ledger (first: a spend is recorded before its report is queued),
   * the outbox's changed segments and its index, the campaign cache. The outbox is stored in
   * segments, one per `recordMany` call, so that recording writes the new reports and not the
   * whole queue.
   */
  #stateTexts(): [string, string | null][] {
    const segments: [string, string | null][] = [...this.#dirty].map((segment) => {
      const items = this.#outbox.filter((q) => q.segment === segment);
      return [`outbox_${segment}`, items.length ? JSON.stringify(items) : null];
    });
    this.#dirty.clear();
    const live = [...new Set(this.#outbox.map((q) => q.segment))].sort((a, b) => a - b);
    return [
      ...(this.#ledger as BudgetLedger).texts(),
      ...segments,
      ["outbox", JSON.stringify(live)],
      ["campaigns", JSON.stringify(Object.fromEntries(this.#cached))],
    ];
  }

  /** Keep only the queued reports `keep` accepts, marking the segments that changed. */
  #retain(keep: (q: Queued) => boolean): number {
    const before = this.#outbox.length;
    this.#outbox = this.#outbox.filter((q) => keep(q) || (this.#dirty.add(q.segment), false));
    return before - this.#outbox.length;
  }

  /** Why the stored ledger was found damaged when this client started (`null`: it was not). */
  async ledgerDamage(): Promise<string | null> {
    await this.#ready;
    return (this.#ledger as BudgetLedger).damage;
  }

  // ---- campaigns ---------------------------------------------------------------------------

  /** A campaign document checked, with its mechanism: at once when the mechanism's code is loaded. */
  #verify(input: string | object, name?: string): Entry | Promise<Entry> {
    // a secure-aggregation campaign has a "dap" key (no other document has one, at any depth)
    if (typeof input === "string" ? /"dap"\s*:/.test(input) : "dap" in Object(input)) {
      return import("./dap/driver.js").then((dap) => dap.dapEntry(input, name, this.#mechanisms, this.#allowInsecure));
    }
    const document = parseCampaignDocument(input, name);
    const mechanism = this.#mechanisms(document.mechanism);
    // a shuffled campaign's target is checked by the amplification bound and its sealing key by
    // shuffled.ts: a chunk of its own in browsers
    const bound = document.shuffle !== null && shuffled === null ? loadShuffled() : undefined;
    if (mechanism instanceof Promise || bound !== undefined) {
      return Promise.all([mechanism, bound]).then(([built]) => this.#verified(document, built));
    }
    return this.#verified(document, mechanism);
  }

  #verified(document: CampaignDocument, mechanism: Mechanism): Campaign {
    const config = document.mechanism;
    const mechanismName = config.mechanism;
    // What the client does is the mechanism's to say (Python: value_kind, is_memoized,
    // uses_device_choices): an app's own factory that states none of it is refused here.
    const kind = mechanism.valueKind;
    if (!VALUE_KINDS.has(kind)) {
      throw new Error(
        `campaign ${document.name}: mechanism ${JSON.stringify(mechanismName)} states no value kind the TelemetryClient records ` +
          `(valueKind is ${describe(kind)}; expected one of ${[...VALUE_KINDS].join(", ")})`,
      );
    }
    const memoized = mechanism.memoized === true;
    if (memoized && (typeof mechanism.memoKeys !== "function" || typeof mechanism.epsilonInf !== "number")) {
      throw new Error(
        `campaign ${document.name}: mechanism ${JSON.stringify(mechanismName)} is memoized but states no memoKeys and epsilonInf, ` +
          "which the ledger charges epsilon_inf by",
      );
    }
    const sealing = document.shuffle === null ? null : (shuffled as ShuffledCode).sealingKey(document, mechanism);
    // the domain as the value kind wants it (Python: campaign.check_domain)
    if (kind === "category") {
      if (document.domain === null || document.domain.length !== config.k) {
        throw new Error(`campaign ${document.name}: domain must have k=${String(config.k)} labels`);
      }
    } else if (kind === "number" && document.domain !== null) {
      throw new Error(`campaign ${document.name}: domain must be absent for the numeric mechanism ${mechanismName}`);
    } else if (kind === "string" && document.domain !== null) {
      if (mechanism.discovery !== undefined) {
        throw new Error(
          `campaign ${document.name}: domain must be absent for the discovery mechanism ${mechanismName} (it finds the frequent strings itself)`,
        );
      }
      if (document.domain.length < 1 || document.domain.length > MAX_CANDIDATES) {
        throw new Error(
          `campaign ${document.name}: domain (the candidate list of the string mechanism ${mechanismName}) must be absent or 1 to ${MAX_CANDIDATES} strings; got ${document.domain.length}`,
        );
      }
    } else if (kind === "record" && document.domain !== null) {
      throw new Error(
        `campaign ${document.name}: domain must be absent for the multi-attribute mechanism ${mechanismName} (each attribute's labels are in its config)`,
      );
    }
    return {
      document,
      mechanism,
      sealing,
      kind,
      index: new Map((document.domain ?? []).map((label, i) => [label, i])),
      memoized,
      keyed: memoized || mechanism.usesDeviceChoices === true,
    };
  }

  /** What one report spends (the mechanism's own figure, Python's `privacy_epsilon`), and a memoized one's epsilon_inf. */
  #claim(campaign: Campaign): PrivacyClaim {
    const config = campaign.document.mechanism;
    const epsilon = campaign.mechanism.privacyEpsilon ?? config.epsilon;
    const delta = config.delta ?? 0;
    if (typeof epsilon !== "number" || typeof delta !== "number") {
      throw new Error(`campaign ${campaign.document.name}: mechanism.epsilon must be a number; got ${describe(epsilon)}`);
    }
    // the shuffle target and the route: the policy's central ceiling (Python: shuffle, through_shuffler)
    const claim = { mechanism: config.mechanism, epsilon, delta, shuffle: campaign.document.shuffle, throughShuffler: this.shufflerUrl !== null };
    if (!campaign.memoized) return claim;
    return { ...claim, epsilonInf: campaign.mechanism.epsilonInf as number, pseudonymous: campaign.mechanism.deterministicPseudonym === true };
  }

  /** The app's policy, for either kind of campaign. */
  #checkAgainstPolicy(campaign: Entry): void {
    if (campaign.dap) campaign.dap.checkPolicy(this.policy);
    else this.policy.check(campaign.document.name, this.#claim(campaign), campaign.document.configId);
  }

  #checkPolicy(campaign: Entry): void {
    try {
      this.#checkAgainstPolicy(campaign);
    } catch (error) {
      if (error instanceof PolicyViolation) (this.#ledger as BudgetLedger).note(campaign.document.name, `campaign refused by the app's policy: ${error.message}`);
      throw error;
    }
  }

  async #fetchCampaign(name: string): Promise<string> {
    let response: Response;
    try {
      response = await this.#fetch(`${this.baseUrl}/v1/campaigns/${encodeURIComponent(name)}`, { signal: AbortSignal.timeout(10_000) });
    } catch (error) {
      throw new UploadError(`cannot fetch campaign ${name}: ${(error as Error).name}`);
    }
    const declared = Number(response.headers.get("Content-Length") ?? "0");
    if (declared > MAX_DOCUMENT_BYTES) throw new Error(`campaign ${name}: the document is larger than ${MAX_DOCUMENT_BYTES} bytes; refused unread`);
    const text = await response.text();
    if (response.status !== 200) {
      throw new UploadError(`cannot fetch campaign ${name}: HTTP ${response.status}`, response.status, retryAfterSeconds(response.headers.get("Retry-After")));
    }
    return text;
  }

  /** The verified campaign `name`: pinned, cached, or fetched (a changed one is refused until accepted). */
  async #campaign(name: string, refresh = false): Promise<Entry> {
    if (this.#closed.has(name)) throw new Error(`campaign ${name} was closed by the collector`);
    const changed = this.#changed.get(name);
    if (changed !== undefined) {
      throw new Error(
        `campaign ${name} changed: this device accepted config_id ${changed.accepted}, the collector now serves ${changed.served}; ` +
          `nothing is recorded for it until the app calls acceptCampaignChange(${JSON.stringify(name)})`,
      );
    }
    const ready = this.#campaigns.get(name);
    if (ready !== undefined && !refresh) return ready;
    const pinned = this.#pinned.get(name);
    const cached = this.#cached.get(name);
    let campaign: Entry;
    if (pinned !== undefined && !refresh) {
      campaign = pinned;
    } else if (cached !== undefined && !refresh) {
      campaign = await this.#verify(cached, name);
    } else {
      campaign = await this.#verify(await this.#fetchCampaign(name), name);
      const accepted = pinned?.document.configId ?? (cached === undefined ? undefined : (await this.#verify(cached, name)).document.configId);
      if (accepted !== undefined && accepted !== campaign.document.configId) {
        (this.#ledger as BudgetLedger).note(name, `campaign changed: config_id ${accepted} -> ${campaign.document.configId}; refused until the app accepts it`);
        this.#changed.set(name, { accepted, served: campaign.document.configId });
        this.#campaigns.delete(name);
        await this.#persist(this.#stateTexts());
        return this.#campaign(name);
      }
    }
    this.#checkPolicy(campaign);
    this.#cached.set(name, campaign.document.text);
    this.#campaigns.set(name, campaign);
    return campaign;
  }

  /** Accept the configuration the collector serves now for `name` (the app's decision; noted in the log). */
  acceptCampaignChange(name: string): Promise<void> {
    return this.#serial(async () => {
      const campaign = await this.#verify(await this.#fetchCampaign(name), name);
      this.#checkPolicy(campaign);
      (this.#ledger as BudgetLedger).note(name, `campaign change accepted: config_id -> ${campaign.document.configId}`);
      this.#changed.delete(name);
      this.#pinned.delete(name);
      this.#cached.set(name, campaign.document.text);
      this.#campaigns.set(name, campaign);
      await this.#persist(this.#stateTexts());
    });
  }

  // ---- recording -----------------------------------------------------------------------------

  #drop(campaign: string, reason: string, count: number, error?: Error): void {
    const reasons = this.#dropped.get(campaign) ?? new Map<string, number>();
    reasons.set(reason, (reasons.get(reason) ?? 0) + count);
    this.#dropped.set(campaign, reasons);
    if (error !== undefined) this.#noteError(campaign, error);
  }

  #noteError(campaign: string | null, error: Error): void {
    const status = error instanceof UploadError ? error.status : null;
    this.#lastError = { at: this.#clock(), campaign, type: error.name, status, message: error.message };
  }

  /** Whether a number (or a vector) lies outside the campaign's range, which the mechanism clips it to. */
  #outside(campaign: Campaign, value: unknown): boolean {
    const { lower, upper } = campaign.document.mechanism;
    if (campaign.kind !== "number" || typeof lower !== "number" || typeof upper !== "number") return false;
    return (Array.isArray(value) ? value : [value]).some((x) => (x as number) < lower || (x as number) > upper);
  }

  /** A label as its index, or a checked number, string or record; the error names the position and the value's type. */
  #encode(campaign: Campaign, value: unknown, position: number): unknown {
    const name = campaign.document.name;
    const at = `the value at position ${position} (${describe(value)})`;
    switch (campaign.kind) {
      case "category": {
        const code = typeof value === "string" ? campaign.index.get(value) : undefined;
        if (code === undefined) {
          throw new TypeError(`${at} is not a label of campaign ${name}; its domain has ${campaign.index.size} labels`);
        }
        return code;
      }
      case "number": {
        const numbers = Array.isArray(value) ? value : [value];
        if (!numbers.every((x) => typeof x === "number" && Number.isFinite(x))) {
          throw new TypeError(`${at} of numeric campaign ${name} must be a finite number (or an array of them)`);
        }
        return value;
      }
      case "string":
        if (typeof value !== "string") throw new TypeError(`${at} of string campaign ${name} must be a string`);
        return value;
      case "record":
        // the mechanism checks the record's fields (multi, fourier: attribute -> label; pckv:
        // key index -> number), naming the position and the field, never a value
        if (value === null || typeof value !== "object" || Array.isArray(value)) {
          throw new TypeError(`${at} of campaign ${name} must be an object (a record of the fields its mechanism states)`);
        }
        return value;
    }
  }

  /**
   * Randomize one value at once and queue only its randomized report; resolve to its id, or
   * `null` when the campaign is unavailable (the value is dropped and counted in `status()`).
   * Rejects only for programming errors (an unknown label, a wrong type), a
   * {@link PolicyViolation}, and a {@link BudgetExceededError}.
   */
  record(campaign: string, value: unknown): Promise<string | null> {
    return this.recordMany(campaign, [value]).then((ids) => ids[0] ?? null);
  }

  /**
   * Randomize many values and queue their reports in one write; resolve to their ids. All or
   * nothing: one bad value rejects before anything is queued. An unavailable campaign drops
   * them all (counted) and resolves to `[]`.
   */
  recordMany(campaign: string, values: readonly unknown[]): Promise<string[]> {
    if (typeof campaign !== "string") return Promise.reject(new TypeError(`campaign must be a campaign name (a string); got ${describe(campaign)}`));
    if (!Array.isArray(values)) return Promise.reject(new TypeError(`values must be an array; got ${describe(values)}`));
    return this.#serial(async () => {
      let entry: Entry;
      let seal: typeof import("./sealing.js").sealPayload | undefined;
      try {
        entry = await this.#campaign(campaign);
        // sealing's code (X25519, XSalsa20-Poly1305) is a chunk of its own, for shuffled campaigns only
        if (!entry.dap && entry.sealing !== null) seal = (await import("./sealing.js")).sealPayload;
      } catch (error) {
        if (error instanceof PolicyViolation) throw error;
        const reason =
          error instanceof UploadError
            ? "campaign-unavailable"
            : this.#changed.has(campaign)
              ? "campaign-changed"
              : this.#closed.has(campaign)
                ? "campaign-closed"
                : "campaign-unverifiable";
        this.#drop(campaign, reason, values.length, error as Error);
        return [];
      }
      if (entry.dap) {
        // Prio3 shards sealed to both Aggregators, authorized by the ledger (the DAP code)
        const [items, clipped] = await entry.dap.record(values, this.#rng, this.#clock(), this.policy, this.#ledger as BudgetLedger);
        return this.#enqueue(campaign, entry.document.configId, items, clipped);
      }
      const info = entry;
      const encoded = values.map((value, position) => this.#encode(info, value, position));
      let clipped = 0;
      for (const value of encoded) if (this.#outside(info, value)) clipped += 1;
      let reports: unknown[];
      let memoKeys: string[] | undefined;
      try {
        // memoized mechanisms derive their permanent responses from the keyed source, pem,
        // multi, fourier and hierarchical their per-campaign choices (client.py `_produce_reports`)
        const keys = info.keyed ? new DeviceKeys(this.#secret as Uint8Array, memoScope(campaign, info.document.mechanismJson)) : undefined;
        reports = info.mechanism.perturb(encoded, keys === undefined ? { rng: this.#rng } : { rng: this.#rng, keys });
        if (keys !== undefined && info.memoized) memoKeys = (info.mechanism.memoKeys as NonNullable<Mechanism["memoKeys"]>)(encoded, keys);
      } catch (error) {
        throw new TypeError(`campaign ${campaign}: ${(error as Error).message}`);
      }
      let payloads = info.mechanism.toWire(reports);
      const budget = this.policy.effectiveBudget(info.document.policy);
      if (budget !== null) {
        const claim = this.#claim(info);
        // a memoized value pays epsilon_inf once (its first report), later reports nothing
        const cost = memoKeys === undefined ? claim.epsilon : (claim.epsilonInf as number);
        (this.#ledger as BudgetLedger).authorize(campaign, budget, cost, payloads, memoKeys);
      }
      const sealing = info.sealing;
      if (sealing !== null) {
        // Nonces and ephemeral keys from the platform CSPRNG, never the injected source: two
        // devices seeded alike would share nonces, and the collector would keep one report.
        const nonces = new CryptoWordSource();
        const sealWith = seal;
        if (sealWith === undefined) throw new Error(`campaign ${campaign}: sealing's code is not loaded`);
        payloads = payloads.map((payload) => sealWith(payload, sealing, nonces));
      }
      const reserved = info.mechanism.reservedCount?.(encoded) ?? 0;
      if (reserved) this.#reserved.set(campaign, (this.#reserved.get(campaign) ?? 0) + reserved);
      const counts = info.mechanism.deviceCounters?.(encoded) ?? {};
      for (const [counter, count] of Object.entries(counts)) {
        const mine = this.#counters.get(campaign) ?? new Map<string, number>();
        mine.set(counter, (mine.get(counter) ?? 0) + count);
        this.#counters.set(campaign, mine);
      }
      const ids = new Uint8Array(16 * payloads.length);
      globalThis.crypto.getRandomValues(ids);
      const items = payloads.map((payload, i) => ({ id: hex(ids.subarray(16 * i, 16 * i + 16)), payload }));
      return this.#enqueue(campaign, info.document.configId, items, clipped);
    });
  }

  /** Append reports to the outbox in one stored segment (and count the clipped values); their ids. */
  async #enqueue(campaign: string, configId: string, items: readonly { id: string; payload: unknown }[], clipped: number): Promise<string[]> {
    if (clipped) this.#clipped.set(campaign, (this.#clipped.get(campaign) ?? 0) + clipped);
    const segment = this.#nextSegment++;
    this.#dirty.add(segment);
    this.#outbox.push(...items.map(({ id, payload }) => ({ segment, id, campaign, config_id: configId, payload })));
    await this.#persist(this.#stateTexts());
    return items.map((item) => item.id);
  }

  /** How many reports wait in the outbox (of one campaign, or all). */
  async pending(campaign?: string): Promise<number> {
    await this.#ready;
    return this.#outbox.filter((q) => campaign === undefined || q.campaign === campaign).length;
  }

  /**
   * What this client counted about the values it randomized for `campaign` since it started
   * (the mechanism's `deviceCounters`; kept on the device, never sent): for `pckv`,
   * `pckv_records_over_padding`, the records whose keys the estimates under-count.
   */
  counters(campaign: string): Record<string, number> {
    return Object.fromEntries(this.#counters.get(campaign) ?? []);
  }

  /** What this client noticed, as counts and messages (never a value). */
  status(): {
    queued: Record<string, number>;
    last_error: LastError | null;
    next_attempt: number | null;
    consecutive_failures: number;
    dropped: Record<string, Record<string, number>>;
    clipped: Record<string, number>;
    reserved_values: Record<string, number>;
    counters: Record<string, Record<string, number>>;
    changed_campaigns: Record<string, { accepted: string; served: string }>;
    storage: { kind: string; persistent: boolean; error: string | null };
  } {
    const queued: Record<string, number> = {};
    for (const q of this.#outbox) queued[q.campaign] = (queued[q.campaign] ?? 0) + 1;
    return {
      queued,
      last_error: this.#lastError === null ? null : { ...this.#lastError },
      next_attempt: this.#nextAttempt,
      consecutive_failures: this.#failures,
      dropped: Object.fromEntries([...this.#dropped].map(([c, r]) => [c, Object.fromEntries(r)])),
      clipped: Object.fromEntries(this.#clipped),
      reserved_values: Object.fromEntries(this.#reserved),
      counters: Object.fromEntries([...this.#counters].map(([c, counts]) => [c, Object.fromEntries(counts)])),
      changed_campaigns: Object.fromEntries(this.#changed),
      storage: { kind: this.storage.kind, persistent: this.#storageError === null && this.storage.kind !== "memory", error: this.#storageError },
    };
  }

  /** The user-visible log: what was sent under a budget, and what the client noticed. */
  async privacyLog(campaign?: string): Promise<ReturnType<BudgetLedger["history"]>> {
    await this.#ready;
    return (this.#ledger as BudgetLedger).history(campaign);
  }

  // ---- uploading -----------------------------------------------------------------------------

  /**
   * Upload queued reports; resolve to how many were acknowledged. Never rejects for the network
   * or the collector's answers: the rest stays queued and `status()` says why. After a failed
   * flush, one before `next_attempt` returns 0 at once unless `force`.
   */
  flush(options: { force?: boolean; deadline?: number } = {}): Promise<number> {
    return this.#serial(async () => {
      if (!options.force && this.#nextAttempt !== null && this.#clock() < this.#nextAttempt) return 0;
      const end = Date.now() + 1000 * (options.deadline ?? this.flushDeadline);
      const names = [...new Set(this.#outbox.map((q) => q.campaign))];
      const counter = { acknowledged: 0 };
      let failure: [string, Error] | null = null;
      for (const name of names) {
        try {
          await this.#flushCampaign(name, end, counter);
        } catch (error) {
          failure ??= [name, error as Error];
          if (error instanceof UploadError && (error.status === null || RETRY_STATUSES.has(error.status))) break;
        }
      }
      this.#settleFlush(failure);
      await this.#persist(this.#stateTexts());
      return counter.acknowledged;
    });
  }

  #settleFlush(failure: [string, Error] | null): void {
    if (failure === null) {
      this.#failures = 0;
      this.#nextAttempt = null;
      return;
    }
    const [name, error] = failure;
    this.#failures += 1;
    // "Equal jitter": half fixed, half uniform, so devices do not retry in step.
    const ceiling = Math.min(BACKOFF_MAX, BACKOFF_BASE * 2 ** Math.min(this.#failures - 1, 32));
    let wait = ceiling / 2 + uniform() * (ceiling / 2);
    if (error instanceof UploadError && error.retryAfter !== null) wait = Math.max(wait, Math.min(error.retryAfter, BACKOFF_MAX));
    this.#nextAttempt = this.#clock() + wait;
    this.#noteError(name, error);
  }

  #body(configId: string, batch: readonly Queued[]): string {
    return JSON.stringify({ config_id: configId, reports: batch.map((q) => ({ id: q.id, payload: q.payload })) });
  }

  /**
   * Where a campaign's reports go: a secure-aggregation campaign's to its Leader, a shuffled
   * campaign's to the shuffler, else to the collector.
   */
  #destination(info: Entry): [string, Record<string, string>] {
    if (info.dap) return info.dap.upload;
    const name = info.document.name;
    const path = `/v1/campaigns/${encodeURIComponent(name)}/reports`;
    const headers = { "Content-Type": "application/json" };
    if (info.sealing === null) return [`${this.baseUrl}${path}`, headers];
    if (this.shufflerUrl === null) {
      throw new UploadError(`campaign ${name} is shuffled: give TelemetryClient a shufflerUrl (its reports never go to the collector directly)`);
    }
    return [`${this.shufflerUrl}${path}`, { ...headers, ...this.#shufflerHeaders }];
  }

  /** One POST with retries (network errors, 408, 429, 5xx), backoff with jitter, `Retry-After`, within `end`. */
  async #post(info: Entry, body: string | Uint8Array<ArrayBuffer>, end: number): Promise<Response> {
    const name = info.document.name;
    const [url, headers] = this.#destination(info);
    let attempt = 0;
    for (;;) {
      let response: Response | null = null;
      let networkError: Error | null = null;
      try {
        response = await this.#fetch(url, {
          method: "POST",
          headers,
          body,
          signal: AbortSignal.timeout(Math.max(1, end - Date.now())),
        });
      } catch (error) {
        networkError = error as Error;
      }
      if (response !== null && !RETRY_STATUSES.has(response.status)) return response;
      const retryAfter = response === null ? null : retryAfterSeconds(response.headers.get("Retry-After"));
      if (attempt >= this.retries) {
        if (response !== null) return response;
        throw new UploadError(`upload to campaign ${name} failed after retries: ${networkError?.name ?? "error"}`);
      }
      const backoff = Math.min(30, 0.25 * 2 ** attempt) + uniform() * 0.25;
      const wait = Math.max(backoff, Math.min(retryAfter ?? 0, MAX_RETRY_AFTER));
      if (Date.now() + wait * 1000 > end) {
        if (response !== null) return response;
        throw new UploadError(`upload to campaign ${name} stopped: waiting ${wait.toFixed(3)} s would pass the flush deadline`, null, retryAfter);
      }
      await response?.body?.cancel();
      await sleep(wait);
      attempt += 1;
    }
  }

  /** Upload one campaign's queued reports, counting acknowledgements in `counter` as they come. */
  async #flushCampaign(name: string, end: number, counter: { acknowledged: number }): Promise<void> {
    let info = await this.#campaign(name);
    this.#dropOtherConfigs(info);
    let batchSize = this.batchSize;
    let refetched = false;
    for (;;) {
      const batch = this.#outbox.filter((q) => q.campaign === name).slice(0, batchSize);
      if (batch.length === 0) return;
      if (Date.now() >= end) throw new UploadError(`upload to campaign ${name} stopped: the flush deadline passed`);
      // a secure-aggregation campaign's reports go to its Leader as one UploadRequest (docs/dap.md)
      const dap = info.dap;
      const response = await this.#post(info, dap ? dap.uploadBody(batch) : this.#body(info.document.configId, batch), end);
      const bytes = new Uint8Array(await response.arrayBuffer());
      const text = new TextDecoder().decode(bytes);
      if (response.status === 200) {
        const settled = !dap ? this.#settle(name, batch, text) : dap.settle(batch, bytes, (reason, count) => this.#drop(name, reason, count), (keep) => this.#retain(keep));
        counter.acknowledged += settled[0];
        await this.#persist(this.#stateTexts());
        if (settled[1]) return;
        continue;
      }
      let problemType: unknown = null;
      let detail = "";
      if ((response.headers.get("Content-Type") ?? "").startsWith("application/problem+json")) {
        try {
          const problem = JSON.parse(text) as { type?: unknown; detail?: unknown };
          problemType = problem.type;
          detail = typeof problem.detail === "string" ? `: ${problem.detail}` : "";
        } catch {
          /* not a problem document */
        }
      }
      if (response.status === 409 && problemType === `${PROBLEM_PREFIX}stale-config`) {
        if (refetched) throw new UploadError(`campaign ${name}: config still stale after refetching`, 409);
        refetched = true;
        info = await this.#campaign(name, true);
        this.#dropOtherConfigs(info);
        continue;
      }
      if (response.status === 410 && problemType === `${PROBLEM_PREFIX}campaign-closed`) {
        const dropped = this.#retain((q) => q.campaign !== name);
        (this.#ledger as BudgetLedger).note(name, `campaign closed by the collector; ${dropped} queued reports dropped unsent`);
        this.#closed.add(name);
        this.#campaigns.delete(name);
        return;
      }
      if (response.status === 413 && batchSize > 1) {
        batchSize = Math.max(1, Math.floor(batchSize / 2));
        continue;
      }
      throw new UploadError(
        `upload to campaign ${name} refused: HTTP ${response.status}${detail}`,
        response.status,
        retryAfterSeconds(response.headers.get("Retry-After")),
      );
    }
  }

  /** Remove what the collector answered for; `[acknowledged, deferred > 0]`. */
  #settle(name: string, batch: readonly Queued[], text: string): [number, boolean] {
    let accepted: number;
    let duplicate: number;
    let rejected: number[];
    let deferred: number[];
    try {
      const body = JSON.parse(text) as { accepted: unknown; duplicate: unknown; rejected: { index: unknown }[]; deferred?: unknown[] };
      accepted = Number(body.accepted);
      duplicate = Number(body.duplicate);
      rejected = body.rejected.map((r) => Number(r.index));
      deferred = (body.deferred ?? []).map(Number);
    } catch {
      throw new UploadError(`campaign ${name}: unreadable upload response`, 200);
    }
    const answered = accepted + duplicate + rejected.length + deferred.length;
    if (answered !== batch.length || ![...rejected, ...deferred].every((i) => Number.isInteger(i) && i >= 0 && i < batch.length)) {
      throw new UploadError(`campaign ${name}: the response accounts for ${answered} reports, not ${batch.length}`, 200);
    }
    const keep = new Set(deferred.map((i) => (batch[i] as Queued).id));
    const done = new Set(batch.filter((q) => !keep.has(q.id)).map((q) => q.id));
    this.#retain((q) => !done.has(q.id));
    return [accepted + duplicate, deferred.length > 0];
  }

  #dropOtherConfigs(campaign: Entry): void {
    const name = campaign.document.name;
    this.#retain((q) => q.campaign !== name || q.config_id === campaign.document.configId);
  }

  /**
   * On `pagehide`: send what fits in the browser's 64 KiB keepalive budget with
   * `fetch(..., {keepalive: true})`. Best effort: the reports stay queued (the outbox is
   * stored), so the next page's flush re-sends them and the collector counts them once by id
   * (a secure-aggregation campaign's go to its Leader, `DapDriver.keepalive`: report_replayed).
   */
  flushOnExit(): number {
    const encoder = new TextEncoder();
    let budget = KEEPALIVE_BYTES;
    let sent = 0;
    const byCampaign = new Map<string, Queued[]>();
    for (const q of this.#outbox) {
      const list = byCampaign.get(q.campaign);
      if (list === undefined) byCampaign.set(q.campaign, [q]);
      else list.push(q);
    }
    for (const [name, queued] of byCampaign) {
      const info = this.#campaigns.get(name) ?? this.#pinned.get(name);
      if (!info) continue;
      if (info.dap) {
        [budget, sent] = info.dap.keepalive(queued, budget, sent, this.#fetch);
        continue;
      }
      let destination: [string, Record<string, string>];
      try {
        destination = this.#destination(info);
      } catch {
        continue; // a shuffled campaign without a shuffler: it waits for flush()
      }
      // The body's size grows by each report's JSON and a comma: no re-encoding per report.
      let size = encoder.encode(this.#body(info.document.configId, [])).length;
      const batch: Queued[] = [];
      for (const q of queued) {
        const item = encoder.encode(JSON.stringify({ id: q.id, payload: q.payload })).length + (batch.length ? 1 : 0);
        if (size + item > budget) break;
        size += item;
        batch.push(q);
      }
      if (batch.length === 0) continue;
      budget -= size;
      sent += batch.length;
      this.#fetch(destination[0], { method: "POST", headers: destination[1], body: this.#body(info.document.configId, batch), keepalive: true }).catch(
        () => undefined,
      );
    }
    return sent;
  }

}
