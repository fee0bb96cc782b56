/**
 * The app's privacy policy: the floor a collector cannot lower (Python: `client_sdk.policy`).
 * Every campaign is checked against it before anything is randomized; a weaker one raises
 * {@link PolicyViolation} naming the field and both numbers.
 */
import { type BudgetPolicy, budgetPolicy, describe } from "./config.js";
import { MECHANISM_GROUPS } from "./mechanisms/loader.js";

/** A campaign weaker than the app's {@link PrivacyPolicy}; nothing was randomized. */
export class PolicyViolation extends Error {
  override readonly name = "PolicyViolation";
  constructor(
    readonly campaign: string,
    readonly field: string,
    readonly campaignValue: unknown,
    readonly policyValue: unknown,
    note?: string,
  ) {
    super(
      `campaign ${JSON.stringify(campaign)} is refused by the app's privacy policy: ${field} is ` +
        `${JSON.stringify(campaignValue)} in the campaign, the policy allows ${JSON.stringify(policyValue)}` +
        (note === undefined ? "" : ` (${note})`),
    );
  }
}

/** The options of {@link PrivacyPolicy}, with Python's names and defaults. */
export interface PrivacyPolicyOptions {
  /** The largest epsilon of one report (default 4). */
  max_epsilon?: number;
  /** The largest epsilon_inf of a memoized campaign (default 8). */
  max_epsilon_inf?: number;
  /** The largest delta of one report (default 1e-6). */
  max_delta?: number;
  /** The largest budget per period; `null` grants the campaign's own. */
  budget?: BudgetPolicy | null;
  /** Mechanism names the app accepts (`null`: every one this SDK registers). */
  allowed_mechanisms?: readonly string[] | null;
  /** Campaign name -> the only `config_id` accepted for it. */
  pinned_config_ids?: Readonly<Record<string, string>>;
  /** Accept memoized campaigns whose reports carry a deterministic pseudonym (default false). */
  allow_pseudonymous_memoization?: boolean;
  /**
   * The largest central epsilon of a shuffled batch the app accepts in exchange for a local
   * epsilon above `max_epsilon` (`null`, the default: shuffled campaigns are held to `max_epsilon`
   * like any other; see {@link PrivacyPolicy.check}). The same field as Python's, which also
   * bounds the Aggregators' noise of a secure-aggregation (DAP) campaign.
   */
  max_central_epsilon?: number | null;
  /** The largest central delta of a shuffled batch (default 1e-6). */
  max_central_delta?: number;
  /** The largest local epsilon of one report of a shuffled campaign accepted under the central ceiling (default 10). */
  max_shuffled_epsilon?: number;
  /**
   * DAP Aggregators the app trusts: endpoint URL (compared after adding a final `/`) -> X25519
   * HPKE public key (32 bytes, unpadded base64url). Empty (the default): secure-aggregation
   * campaigns are refused (`checkDapPolicy`, src/dap/policy.ts).
   */
  trusted_aggregators?: Readonly<Record<string, string>>;
}

function epsilonOption(value: unknown, field: string): number {
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`${field} must be a positive finite number; got ${describe(value)}`);
  }
  return value;
}

function deltaOption(value: unknown, field: string, allowZero: boolean): number {
  if (typeof value !== "number" || !(value < 1) || !(allowZero ? value >= 0 : value > 0)) {
    throw new RangeError(`${field} must be a number in ${allowZero ? "[0, 1)" : "(0, 1)"}; got ${describe(value)}`);
  }
  return value;
}

/** What a campaign's mechanism claims for one report, read from its canonical config. */
export interface PrivacyClaim {
  readonly mechanism: string;
  readonly epsilon: number;
  readonly delta: number;
  /** A memoized mechanism's epsilon_inf (what unlimited reports of one value reveal). */
  readonly epsilonInf?: number;
  /** A memoized mechanism whose reports of one value carry a deterministic pseudonym (L-LH's seed, memoized PEM's, dBitFlip's buckets). */
  readonly pseudonymous?: boolean;
  /** A shuffled campaign's `shuffle` object, its central target (absent or `null`: not shuffled). */
  readonly shuffle?: unknown;
  /** Whether this client sends the campaign's reports through a shuffler (`shufflerUrl` given). */
  readonly throughShuffler?: boolean;
}

/** What the app allows, whatever the collector serves (Python: `PrivacyPolicy`). */
export class PrivacyPolicy {
  readonly max_epsilon: number;
  readonly max_epsilon_inf: number;
  readonly max_delta: number;
  readonly budget: BudgetPolicy | null;
  readonly allowed_mechanisms: ReadonlySet<string> | null;
  readonly pinned_config_ids: Readonly<Record<string, string>>;
  readonly allow_pseudonymous_memoization: boolean;
  readonly max_central_epsilon: number | null;
  readonly max_central_delta: number;
  readonly max_shuffled_epsilon: number;
  readonly trusted_aggregators: Readonly<Record<string, string>>;

  constructor(options: PrivacyPolicyOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError(`PrivacyPolicy options must be an object; got ${describe(options)}`);
    }
    this.max_epsilon = epsilonOption(options.max_epsilon ?? 4.0, "max_epsilon");
    this.max_epsilon_inf = epsilonOption(options.max_epsilon_inf ?? 8.0, "max_epsilon_inf");
    this.max_delta = deltaOption(options.max_delta ?? 1e-6, "max_delta", true);
    // the central ceiling of shuffled campaigns (Python's check_epsilon: at most 40)
    this.max_shuffled_epsilon = ceilingOption(options.max_shuffled_epsilon ?? 10.0, "max_shuffled_epsilon");
    this.max_central_delta = deltaOption(options.max_central_delta ?? 1e-6, "max_central_delta", false);
    const central = options.max_central_epsilon ?? null;
    this.max_central_epsilon = central === null ? null : ceilingOption(central, "max_central_epsilon");
    this.budget = options.budget == null ? null : budgetPolicy(options.budget, "budget");
    const allowed = options.allowed_mechanisms ?? null;
    if (allowed !== null) {
      if (!Array.isArray(allowed) || !allowed.every((name) => typeof name === "string")) {
        throw new TypeError(`allowed_mechanisms must be an array of mechanism names; got ${describe(allowed)}`);
      }
      const unknown = allowed.filter((name) => !Object.hasOwn(MECHANISM_GROUPS, name) && !KNOWN_MECHANISMS.has(name));
      if (unknown.length) {
        throw new RangeError(
          `allowed_mechanisms: unknown mechanism name(s) ${unknown.map((n) => JSON.stringify(n)).join(", ")}; ` +
            `the known names are ${[...KNOWN_MECHANISMS].sort().join(", ")}`,
        );
      }
    }
    this.allowed_mechanisms = allowed === null ? null : new Set(allowed);
    const pinned = options.pinned_config_ids ?? {};
    if (pinned === null || typeof pinned !== "object" || !Object.values(pinned).every((v) => typeof v === "string")) {
      throw new TypeError(`pinned_config_ids must map campaign names to config ids; got ${describe(pinned)}`);
    }
    this.pinned_config_ids = Object.freeze({ ...pinned });
    const pseudonymous = options.allow_pseudonymous_memoization ?? false;
    if (typeof pseudonymous !== "boolean") {
      throw new TypeError(`allow_pseudonymous_memoization must be true or false; got ${describe(pseudonymous)}`);
    }
    this.allow_pseudonymous_memoization = pseudonymous;
    // secure aggregation: checked, with the campaign, by src/dap/policy.ts (the DAP code, loaded when needed)
    this.trusted_aggregators = Object.freeze({ ...options.trusted_aggregators });
    Object.freeze(this);
  }

  /**
   * Throw {@link PolicyViolation} when the campaign is weaker than this policy (a shuffled
   * campaign sent through a shuffler may exceed `max_epsilon` under the central ceiling:
   * src/amplification.ts, `checkShuffled`).
   */
  check(campaign: string, claim: PrivacyClaim, configId: string): void {
    const pinned = Object.hasOwn(this.pinned_config_ids, campaign) ? this.pinned_config_ids[campaign] : undefined;
    if (pinned !== undefined && pinned !== configId) {
      throw new PolicyViolation(campaign, "pinned_config_ids", configId, pinned);
    }
    if (this.allowed_mechanisms !== null && !this.allowed_mechanisms.has(claim.mechanism)) {
      throw new PolicyViolation(campaign, "allowed_mechanisms", claim.mechanism, [...this.allowed_mechanisms].sort());
    }
    if (!(claim.epsilon <= this.max_epsilon)) {
      if (claim.shuffle == null || this.max_central_epsilon === null || claim.throughShuffler !== true) {
        throw new PolicyViolation(campaign, "max_epsilon", claim.epsilon, this.max_epsilon);
      }
      loadedAmplification().checkShuffled(this, campaign, claim, claim.shuffle);
    }
    if (!(claim.delta <= this.max_delta)) {
      throw new PolicyViolation(campaign, "max_delta", claim.delta, this.max_delta);
    }
    if (claim.epsilonInf !== undefined && !(claim.epsilonInf <= this.max_epsilon_inf)) {
      throw new PolicyViolation(campaign, "max_epsilon_inf", claim.epsilonInf, this.max_epsilon_inf);
    }
    if (claim.pseudonymous === true && !this.allow_pseudonymous_memoization) {
      throw new PolicyViolation(campaign, "allow_pseudonymous_memoization", true, false);
    }
  }

  /** The stricter of the campaign's budget and the app's, field by field (Python: `effective_budget`). */
  effectiveBudget(campaign: BudgetPolicy | null): BudgetPolicy | null {
    const ours = this.budget;
    if (campaign === null || ours === null) return campaign ?? ours;
    return {
      epsilon_per_report: Math.min(campaign.epsilon_per_report, ours.epsilon_per_report),
      reports_per_period: Math.min(campaign.reports_per_period, ours.reports_per_period),
      period_seconds: Math.max(campaign.period_seconds, ours.period_seconds),
    };
  }
}

/** Every mechanism name of the protocol (docs/protocol.md), registered here or not yet. */
export const KNOWN_MECHANISMS: ReadonlySet<string> = new Set([
  "grr", "sue", "oue", "ss", "olh", "blh", "hr", "dbitflip", "rappor",
  "duchi", "piecewise", "hybrid", "laplace", "gaussian", "onebitmean", "square_wave", "hierarchical", "fourier",
  "cms", "hcms", "pem", "sfp", "multi", "pckv",
]);

/** The policy of a client built without one (Python: `DEFAULT_POLICY`). */
export const DEFAULT_POLICY = new PrivacyPolicy();

// ---- shuffled campaigns: the central ceiling (docs/shuffler.md, "The device's policy") --------

/** A campaign's central target under shuffling (Python: `client_sdk.campaign.ShufflePlan`). */
export interface ShufflePlan {
  readonly min_batch: number;
  readonly central_epsilon: number;
  readonly delta: number;
}

/** The amplification bound as the policy uses it (src/amplification.ts, `AMPLIFICATION`). */
export interface Amplification {
  /** `shuffle` of a campaign document validated as Python's `ShufflePlan.from_dict` does (errors name the campaign when given). */
  shufflePlan(shuffle: unknown, campaign?: string): ShufflePlan;
  /** The central ceiling's check of a shuffled campaign above `max_epsilon` (Python: `_check_central`). */
  checkShuffled(policy: PrivacyPolicy, campaign: string, claim: PrivacyClaim, shuffle: unknown): void;
}

let amplification: Amplification | null = null;

/**
 * Make the amplification bound available to the policy: Node's entry (index.ts) does it at
 * import; in browsers the client loads it with the first shuffled campaign's document.
 */
export function registerAmplification(bound: Amplification): void {
  amplification = bound;
}

/** Whether {@link registerAmplification} has run (else a shuffled campaign waits for its code). */
export function amplificationLoaded(): boolean {
  return amplification !== null;
}

function loadedAmplification(): Amplification {
  if (amplification === null) throw new Error("the amplification bound is not loaded");
  return amplification;
}

/** A campaign document's `shuffle` validated as Python's `ShufflePlan.from_dict` (the field and the value's type named). */
export function shufflePlanOf(shuffle: unknown, campaign?: string): ShufflePlan {
  return loadedAmplification().shufflePlan(shuffle, campaign);
}

/** An epsilon option of the central ceiling: positive, finite and at most 40 (Python's `check_epsilon`; MAX_EPSILON of mechanisms/bounded.ts, kept out of the browser entry). */
function ceilingOption(value: unknown, field: string): number {
  const epsilon = epsilonOption(value, field);
  if (epsilon > 40) throw new RangeError(`${field} must be at most 40; got ${describe(value)}`);
  return epsilon;
}
