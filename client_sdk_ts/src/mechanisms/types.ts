/** What every device mechanism offers (docs/protocol.md, "Mechanisms"). */
import type { KeyedSource } from "../memoization.js";
import type { WordSource } from "../words.js";

/** A campaign's canonical mechanism config, as the collector serves it (JSON). */
export type MechanismConfig = { readonly mechanism: string } & Readonly<Record<string, unknown>>;

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
  /** One randomized report per value, drawing words in the order the protocol states. */
  perturb(values: readonly Value[], options?: PerturbOptions): Report[];
  /** The JSON payload of each report, deep-equal to the Python SDK's `to_wire`. */
  toWire(reports: readonly Report[]): unknown[];
  /**
   * The widest payload `toWire` can give, a function of the config (Python:
   * `largest_wire_payload`): a shuffled campaign's sealed envelopes are all padded to its length.
   */
  largestWirePayload?(): unknown;
  /** The epsilon one report spends (Python: `privacy_epsilon`); absent: the config's `epsilon`. */
  readonly privacyEpsilon?: number;
  /**
   * Memoized mechanisms (Python: `Memoizing`): what unlimited reports of one value reveal
   * (`epsilon_inf`), which the ledger charges once per memo key.
   */
  readonly epsilonInf?: number;
  /** Memoized mechanisms: the ledger's key of each value's memoized draw (a keyed hash, never the value). */
  memoKeys?(values: readonly Value[], keys: KeyedSource): string[];
}

/** Builds a mechanism from its canonical config, or throws naming the field at fault. */
export type MechanismFactory = (config: MechanismConfig) => Mechanism;
