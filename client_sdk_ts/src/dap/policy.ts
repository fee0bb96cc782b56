/**
 * The app's policy for secure-aggregation campaigns (docs/dap.md, "The app's policy"; Python:
 * `PrivacyPolicy.check_dap`). The policy's fields are `PrivacyPolicy`'s (src/policy.ts, which
 * holds `trusted_aggregators`); the check is here, in the DAP code, so that a page without
 * secure aggregation does not load it.
 */
import { describe } from "../config.js";
import { PolicyViolation, type PrivacyPolicy } from "../policy.js";

/** What {@link checkDapPolicy} reads of a secure-aggregation campaign (a `DapCampaign`). */
export interface DapClaim {
  readonly name: string;
  readonly configId: string;
  readonly leader: string;
  readonly helper: string;
  /** Each Aggregator's HPKE public key as the document writes it (unpadded base64url). */
  readonly leaderKey: string;
  readonly helperKey: string;
  readonly hasLocal: boolean;
  /** `local`'s mechanism name (grr, sue or oue), or `null`. */
  readonly localMechanism: string | null;
  /** `local`'s epsilon (`Infinity` without it). */
  readonly localEpsilon: number;
  /** The task's `dp` and, for `"gaussian:RHO"`, its RHO. */
  readonly dp: string;
  readonly centralRho: number | null;
  /** The Aggregators' central epsilon at `delta` (`Infinity` for `dp = "none"`; a gaussian task's zCDP converted at `delta`). */
  centralEpsilonAt(delta: number): number;
}

/** An Aggregator's endpoint as the policy compares it: with one final `/`. */
function normalUrl(url: string): string {
  return `${url.replace(/\/+$/, "")}/`;
}

/**
 * Throw {@link PolicyViolation} when the app does not accept this secure-aggregation campaign,
 * checked before anything is sharded and in Python's order: no trusted Aggregator at all; one
 * party as both; an untrusted Aggregator or key; a pinned config_id; `local` whose mechanism is not allowed;
 * neither the local epsilon within `max_epsilon` nor the central one within `max_central_epsilon`
 * (so a task without noise and without `local` is always refused); a `"gaussian:RHO"` task's
 * central epsilon is its zCDP converted at `max_central_delta`.
 */
export function checkDapPolicy(policy: PrivacyPolicy, campaign: DapClaim): void {
  const name = campaign.name;
  const trusted = new Map<string, string>();
  for (const [url, key] of Object.entries(policy.trusted_aggregators as Record<string, unknown>)) {
    // checked here rather than in PrivacyPolicy's constructor, which every page loads
    if (!/^https?:\/\//.test(url)) throw new TypeError(`trusted_aggregators: a key is not an http(s) URL (${describe(url)})`);
    if (typeof key !== "string" || !/^[A-Za-z0-9_-]{43}$/.test(key)) {
      throw new TypeError(`trusted_aggregators[${JSON.stringify(url)}] must be a 32-byte X25519 key in unpadded base64url; got ${describe(key)}`);
    }
    trusted.set(normalUrl(url), key);
  }
  if (trusted.size === 0) {
    throw new PolicyViolation(name, "trusted_aggregators", [campaign.leader, campaign.helper], {}, "the app accepts no secure aggregation");
  }
  if (normalUrl(campaign.leader) === normalUrl(campaign.helper) || campaign.leaderKey === campaign.helperKey) {
    throw new PolicyViolation(name, "trusted_aggregators", campaign.leader, campaign.helper, "the leader and the helper must be two parties: one would hold both shares");
  }
  for (const [role, url, key] of [
    ["leader", campaign.leader, campaign.leaderKey],
    ["helper", campaign.helper, campaign.helperKey],
  ] as const) {
    const expected = trusted.get(normalUrl(url));
    if (expected === undefined) throw new PolicyViolation(name, "trusted_aggregators", url, [...trusted.keys()].sort(), `the ${role} is not trusted`);
    if (key !== expected) throw new PolicyViolation(name, "trusted_aggregators", key, expected, `the ${role} ${url}'s HPKE public key is not the trusted one`);
  }
  const pinned = Object.hasOwn(policy.pinned_config_ids, name) ? policy.pinned_config_ids[name] : undefined;
  if (pinned !== undefined && pinned !== campaign.configId) throw new PolicyViolation(name, "pinned_config_ids", campaign.configId, pinned);
  const local = campaign.localMechanism;
  if (local !== null && policy.allowed_mechanisms !== null && !policy.allowed_mechanisms.has(local)) {
    throw new PolicyViolation(name, "allowed_mechanisms", local, [...policy.allowed_mechanisms].sort());
  }
  if (campaign.localEpsilon <= policy.max_epsilon) return; // the local guarantee alone is within the app's limit
  if (policy.max_central_epsilon === null) {
    throw new PolicyViolation(
      name,
      "max_epsilon",
      campaign.localEpsilon,
      policy.max_epsilon,
      "a secure-aggregation campaign without local randomization within max_epsilon needs the app's max_central_epsilon",
    );
  }
  // one (epsilon, delta) ceiling for every kind of noise: a gaussian task's rho-zCDP is held to it
  // through its epsilon at max_central_delta (Canonne, Kamath, Steinke 2020, Corollary 13)
  const central = campaign.centralEpsilonAt(policy.max_central_delta);
  if (!(central <= policy.max_central_epsilon)) {
    const note =
      campaign.centralRho === null
        ? "the central epsilon of the Aggregators' noise (dp); infinite for dp none"
        : `dp ${campaign.dp} is ${campaign.centralRho}-zCDP, epsilon ${central.toPrecision(6)} at max_central_delta ${policy.max_central_delta}`;
    throw new PolicyViolation(name, "max_central_epsilon", central, policy.max_central_epsilon, note);
  }
}
