/** What every device mechanism offers (docs/protocol.md, "Mechanisms"). */
import type { KeyedSource } from "../memoization.js";
import type { WordSource } from "../words.js";

/** A campaign's canonical mechanism config, as the collector serves it (JSON). */
export type MechanismConfig = { readonly mechanism: string } & Readonly<Record<string, unknown>>;

/**
 * What a device records (Python: `Mechanism.value_kind`): a label of the campaign's domain
 * (perturbed as its index), a number (or a vector of numbers), any string, or a record (an
 * object the mechanism checks itself: attribute -> label for `multi` and `fourier`, key index
 * -> number for `pckv`).
 */
export type ValueKind = "category" | "number" | "string" | "record";

/** Options of one `perturb` call. */
export interface PerturbOptions {
  /** The word source (default: the platform CSPRNG). */
  rng?: WordSource;
  /** The device's keyed source for the campaign (memoized mechanisms; see memoization.ts). */
  keys?: KeyedSource;
}

/** A device mechanism: randomizes values into reports and writes their wire payloads. */
export interface Mechanism<Value = unknown, Report = unknown> {
  readonly name: string;
  /** What the app records for a campaign of this mechanism (see {@link ValueKind}). */
  readonly valueKind: ValueKind;
  /** One randomized report per value, drawing words in the order the protocol states. */
  perturb(values: readonly Value[], options?: PerturbOptions): Report[];
  /** The JSON payload of each report, deep-equal to the Python SDK's `to_wire`. */
  toWire(reports: readonly Report[]): unknown[];
  /**
   * The widest payload `toWire` can give, a function of the config (Python:
   * `largest_wire_payload`): a shuffled campaign's sealed envelopes are all padded to its length.
   */
  largestWirePayload(): unknown;
  /**
   * String mechanisms that find the frequent strings themselves (pem: prefixes, sfp: fragments;
   * Python: `discovery`): their campaign has no domain (no candidate list).
   */
  readonly discovery?: "prefixes" | "fragments";
  /** The epsilon one report spends (Python: `privacy_epsilon`); absent: the config's `epsilon`. */
  readonly privacyEpsilon?: number;
  /**
   * A choice made once per device and campaign from the keyed source (PEM's level, a
   * hierarchy's level, the sampled unit of `multi`, the coefficient of `fourier`; Python:
   * `uses_device_choices`): a device passes `keys` to `perturb`; a simulation without them
   * draws the choice per report from `rng`.
   */
  readonly usesDeviceChoices?: boolean;
  /**
   * Memoized (permanent) responses (Python: `is_memoized`): `perturb` requires `keys`, and the
   * ledger charges `epsilonInf` once per `memoKeys` key instead of `privacyEpsilon` per report.
   */
  readonly memoized?: boolean;
  /** Memoized mechanisms: what unlimited reports of one value reveal (Python: `epsilon_inf`). */
  readonly epsilonInf?: number;
  /**
   * Memoized mechanisms whose every report of a value carries the same public part, a pseudonym
   * of (device, campaign, value) (Python: `deterministic_pseudonym`): the app's policy refuses
   * them unless `allow_pseudonymous_memoization`.
   */
  readonly deterministicPseudonym?: boolean;
  /** Memoized mechanisms: the ledger's key of each value's memoized draw (a keyed hash, never the value). */
  memoKeys?(values: readonly Value[], keys: KeyedSource): string[];
  /**
   * String mechanisms of a `max_length` (cms, hcms, pem, sfp): how many of `values` they
   * randomize as the reserved symbol (Python: `count_reserved`); the client counts them.
   */
  reservedCount?(values: readonly Value[]): number;
  /** What the device counts about its own values, kept on the device (Python: `device_counters`). */
  deviceCounters?(values: readonly Value[]): Readonly<Record<string, number>>;
}

/** Builds a mechanism from its canonical config, or throws naming the field at fault. */
export type MechanismFactory = (config: MechanismConfig) => Mechanism;
