/**
 * What memoized mechanisms share (docs/protocol.md, "Memoized variants"; Python:
 * `client_sdk.mechanisms.memoization`, `client_sdk.mechanisms.longitudinal`): the keyed source
 * they require, the instantaneous step (a {@link BatchChain}) that randomizes a permanent
 * response again, the longitudinal wrapper of a frequency oracle, and a device's per-campaign
 * choice. Split from memoization.ts (the keyed source itself) so that the browser bundle's
 * entry does not carry it: only the mechanism chunks do.
 */
import type { KeyedSource } from "./memoization.js";
import type { Mechanism } from "./mechanisms/types.js";
import { MAX_WORD, Rational, thresholdProbability } from "./rational.js";
import { bernoulli, uniformBelow } from "./samplers.js";
import { CryptoWordSource, type WordSource } from "./words.js";

/** The keyed source a memoized mechanism needs, or a clear error naming the mechanism. */
export function requireKeys(keys: KeyedSource | undefined, name: string): KeyedSource {
  if (keys === undefined || keys === null) {
    throw new TypeError(
      `${name}: perturb needs {keys} (a DeviceKeys of the device secret and the campaign's memo scope): ` +
        "permanent responses are derived from it, and a memoized mechanism never falls back to unmemoized reports",
    );
  }
  if (typeof keys.source !== "function" || typeof keys.key !== "function") {
    throw new TypeError(`${name}: keys must be a keyed source (source(label, index), key(label, index)); got ${typeof keys}`);
  }
  return keys;
}

// ---- the instantaneous step ----------------------------------------------------------------

/** The largest T in [low, high] with ratio(T) <= target; ratio is non-decreasing in T. */
export function largestThreshold(
  ratio: (threshold: bigint) => Rational,
  low: bigint,
  high: bigint,
  target: Rational,
): bigint {
  if (ratio(low).cmp(target) > 0) throw new RangeError("no instantaneous randomization reaches the target epsilon");
  if (ratio(high).cmp(target) <= 0) return high;
  let lo = low;
  let hi = high;
  while (hi - lo > 1n) {
    const middle = (lo + hi) / 2n;
    if (ratio(middle).cmp(target) <= 0) lo = middle;
    else hi = middle;
  }
  return lo;
}

/** A chain given by its exact worst-ratio function over a threshold range (Python: `Chain`). */
export function chainThreshold(
  ratio: (threshold: bigint) => Rational,
  range: readonly [bigint, bigint],
  target: Rational,
): bigint {
  return largestThreshold(ratio, range[0], range[1], target);
}

/** The mixture chain's worst one-report ratio (lambda R + (1-lambda) M)/(lambda + (1-lambda) M). */
export function mixtureRatio(high: Rational, mean: Rational): (threshold: bigint) => Rational {
  return (threshold) => {
    const lam = thresholdProbability(threshold);
    const rest = new Rational(1n).sub(lam);
    return lam.mul(high).add(rest.mul(mean)).div(lam.add(rest.mul(mean)));
  };
}

export const MIXTURE_RANGE: readonly [bigint, bigint] = [0n, MAX_WORD];

/** The instantaneous step of a memoized oracle over a batch (Python: `Chain.instantaneous`). */
export interface BatchChain<Report> {
  readonly kind: string;
  /** The step's integer threshold (keep probability, or lambda, times 2^64). */
  readonly threshold: bigint;
  /** One report per permanent response, with fresh words from `rng`, in Python's order. */
  instantaneous(permanent: readonly Report[], rng: WordSource): Report[];
}

/**
 * The mixture chain (any frequency oracle): keep = one word < T per report, then a fresh uniform
 * value per report and the inner mechanism's report of it, all from `rng`; the permanent report
 * when kept, else the fresh one. R = hi/lo and M = mean/lo of the oracle's worst output column.
 */
export function mixtureChain<Report>(
  inner: Mechanism<number, Report>,
  k: number,
  profile: { high: Rational; mean: Rational },
  target: Rational,
): BatchChain<Report> {
  const threshold = chainThreshold(mixtureRatio(profile.high, profile.mean), MIXTURE_RANGE, target);
  return {
    kind: "mixture",
    threshold,
    instantaneous(permanent, rng) {
      const keep = bernoulli(rng, threshold, permanent.length);
      const fresh = inner.perturb(
        uniformBelow(rng, k, permanent.length).map((v) => Number(v)),
        { rng },
      );
      return fresh.map((report, i) => (keep[i] ? permanent[i]! : report));
    },
  };
}

/** The label of a memoized oracle's permanent response (`keys.source("value", v)`). */
export const VALUE_LABEL = "value";

/**
 * A frequency oracle under `"longitudinal"` (Python: `Memoized`): the permanent response of each
 * value is the inner mechanism (built at epsilon_permanent) run on [v] with every word from
 * `keys.source("value", v)`, then the chain randomizes it again from `rng`. One report spends
 * `epsilons.report`; all reports of one value `epsilons.permanent` (`epsilon_inf`), charged once
 * per memo key `keys.key("value", v)`.
 */
export function longitudinal<Report>(
  inner: Mechanism<number, Report>,
  chain: BatchChain<Report>,
  checkValues: (values: readonly unknown[]) => number[],
  epsilons: { readonly report: number; readonly permanent: number },
): Mechanism<number, Report> {
  return {
    name: inner.name,
    valueKind: inner.valueKind,
    memoized: true,
    privacyEpsilon: epsilons.report,
    epsilonInf: epsilons.permanent,
    // L-LH resends the permanent report's hash seed: a pseudonym of (device, campaign, value)
    deterministicPseudonym: chain.kind === "l-lh",
    memoKeys(values, keys) {
      const x = checkValues(values);
      const source = requireKeys(keys, inner.name);
      return x.map((v) => source.key(VALUE_LABEL, v));
    },
    perturb(values, options = {}) {
      const x = checkValues(values);
      const keys = requireKeys(options.keys, inner.name);
      const permanent = x.map((v) => inner.perturb([v], { rng: keys.source(VALUE_LABEL, v) })[0]!);
      return chain.instantaneous(permanent, options.rng ?? new CryptoWordSource());
    },
    toWire(reports) {
      return inner.toWire(reports);
    },
    largestWirePayload: () => inner.largestWirePayload(),
  };
}

/** A device's per-campaign choice: `uniform_below(high, 1)` from `keys.source(label, 0)`. */
export function deviceChoice(keys: KeyedSource, label: string, high: number): number {
  if (high === 1) return 0;
  return Number(uniformBelow(keys.source(label, 0), high, 1)[0]!);
}
