/**
 * dBitFlip's one-bit mean (Ding, Kulkarni & Yekhanin, "Collecting Telemetry Data Privately",
 * NeurIPS 2017; Python: client_sdk/mechanisms/onebitmean.py; docs/protocol.md, "Numbers").
 * Memoized (the default): alpha-point rounding of the value to one of buckets + 1 points with
 * the device's alpha, the point's permanent bit from the keyed source (below T_j, linear between
 * Duchi's thresholds), then a flip with probability gamma from the report's words. Unmemoized:
 * Duchi's kernel, then the flip.
 */
import type { KeyedSource } from "../memoization.js";
import { requireKeys } from "../memo-chain.js";
import { Rational, probabilityThreshold, thresholdProbability } from "../rational.js";
import { logFraction } from "./correctly-rounded.js";
import { bernoulli } from "../samplers.js";
import { ConfigReader, checkScalarValues, clip } from "./bounded.js";
import { DuchiKernel } from "./duchi.js";
import {
  checkKeys,
  wordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const MAX_BUCKETS = 1 << 16;
const ALPHA_LABEL = "onebitmean/alpha";
const BIT_LABEL = "onebitmean/bit";

class OneBitMean implements Mechanism<number, number> {
  readonly name = "onebitmean";
  readonly valueKind = "number";
  readonly lower: number;
  readonly upper: number;
  readonly buckets: number;
  readonly memoize: boolean;
  readonly kernel: DuchiKernel;
  readonly flipThreshold: bigint;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "lower", "upper"], ["buckets", "gamma", "memoize"]);
    const reader: ConfigReader = new ConfigReader(config, this.name);
    this.kernel = new DuchiKernel(reader.epsilon());
    ({ lower: this.lower, upper: this.upper } = reader.bounds());
    this.buckets = reader.has("buckets") ? reader.integer("buckets", 1, MAX_BUCKETS) : 1;
    const gamma = reader.has("gamma") ? reader.config["gamma"] : 0;
    if (typeof gamma !== "number" || !(gamma >= 0 && gamma < 0.5)) reader.fail("gamma", "a number in [0, 0.5)");
    this.flipThreshold = probabilityThreshold(gamma, "nearest");
    this.memoize = reader.has("memoize") ? reader.boolean("memoize") : true;
  }

  /** Memoized (the default): alpha and each rounded point's bit come from the keyed source. */
  get memoized(): boolean {
    return this.memoize;
  }

  /** Unlimited reports of one rounded point reveal at most its memoized bit: epsilon. */
  get epsilonInf(): number {
    return this.kernel.epsilon;
  }

  /**
   * One report's guarantee: epsilon, or with a flip (gamma > 0) the exact smaller value, the
   * larger log ratio of P[1] (upper vs lower) and P[0] (lower vs upper) (Ding, Kulkarni &
   * Yekhanin, NeurIPS 2017; Python: `OneBitMean.privacy_epsilon`, the same float).
   */
  get privacyEpsilon(): number {
    if (this.flipThreshold === 0n) return this.kernel.epsilon;
    const one = new Rational(1n);
    const flip = thresholdProbability(this.flipThreshold);
    const keep = one.sub(flip.mul(2n));
    const low = flip.add(keep.mul(thresholdProbability(this.kernel.lowThreshold)));
    const high = flip.add(keep.mul(thresholdProbability(this.kernel.highThreshold)));
    return Math.max(logFraction(high.div(low)), logFraction(one.sub(low).div(one.sub(high))));
  }

  /** The ledger's key of each value: its rounded point, keyed by the source. */
  memoKeys(values: readonly number[], keys: KeyedSource): string[] {
    const source = requireKeys(keys, this.name);
    return this.#roundedPoints(this.#unit(checkScalarValues(values)), source).map((j) => source.key(BIT_LABEL, j));
  }

  /** The widest payload (Python: `largest_wire_payload`): one bit. */
  largestWirePayload(): number {
    return 0;
  }

  /** Clip to [lower, upper] and map to t in [-1, 1]. */
  #unit(x: readonly number[]): number[] {
    const mid = (this.lower + this.upper) / 2;
    const half = (this.upper - this.lower) / 2;
    return x.map((v) => clip((v - mid) / half, -1, 1));
  }

  /** alpha-point rounding with the device's alpha: up exactly when the fractional position exceeds alpha. */
  #roundedPoints(t: readonly number[], keys: KeyedSource): number[] {
    const alpha = Number(keys.source(ALPHA_LABEL, 0).words(1)[0]) / 2 ** 64;
    return t.map((u) => {
      const position = ((u + 1) / 2) * this.buckets;
      const low = Math.min(Math.floor(position), this.buckets - 1);
      return low + (position - low > alpha ? 1 : 0);
    });
  }

  /** T_j = T_lo + floor(j (T_hi - T_lo)/s): the threshold of rounded point j. */
  pointThreshold(j: number): bigint {
    const low = this.kernel.lowThreshold;
    return low + (BigInt(j) * (this.kernel.highThreshold - low)) / BigInt(this.buckets);
  }

  perturb(values: readonly number[], options?: PerturbOptions): number[] {
    const t = this.#unit(checkScalarValues(values));
    const rng = wordSource(options);
    let bits: number[];
    if (!this.memoize) {
      if (options?.keys !== undefined) {
        throw new TypeError("onebitmean with config.memoize false takes no keyed source (options.keys)");
      }
      bits = this.kernel.sample(rng, t);
    } else {
      const keys = requireKeys(options?.keys, this.name);
      const pointBits = new Map<number, number>(); // one memoized bit per rounded point
      bits = this.#roundedPoints(t, keys).map((point) => {
        let bit = pointBits.get(point);
        if (bit === undefined) {
          const word = keys.source(BIT_LABEL, point).words(1)[0] as bigint;
          bit = word < this.pointThreshold(point) ? 1 : 0;
          pointBits.set(point, bit);
        }
        return bit;
      });
    }
    if (this.flipThreshold === 0n) return bits;
    const flips = bernoulli(rng, this.flipThreshold, bits.length);
    return bits.map((bit, i) => (flips[i] ? 1 - bit : bit));
  }

  toWire(reports: readonly number[]): unknown[] {
    return [...reports];
  }
}

/**
 * `{"mechanism": "onebitmean", "epsilon", "lower", "upper"}`, optionally `"buckets"` (1),
 * `"gamma"` (0) and `"memoize"` (true: `perturb` then needs `options.keys`).
 */
export function oneBitMean(config: MechanismConfig): Mechanism {
  return new OneBitMean(config) as Mechanism;
}
