/**
 * The Laplace mechanism for a bounded number with exact discrete Laplace noise on a grid
 * (Python: client_sdk/mechanisms/laplace.py; docs/protocol.md, "Numbers"): the clipped value is
 * snapped by randomized rounding to a in {0..N}, and the report is a + Z with Z discrete
 * Laplace of scale t/s, s/t the largest fraction with t <= 2^40 at most eps/N (Canonne, Kamath
 * & Steinke, NeurIPS 2020), so the mechanism is exactly (N s/t)-LDP with N s/t <= eps.
 */
import { Rational, expDouble } from "../rational.js";
import { log } from "./correctly-rounded.js";
import { MAX_LAPLACE_DENOMINATOR, discreteLaplace, floorFraction } from "../sampling.js";
import { randomizedRound } from "../samplers.js";
import { ConfigReader, IMPLAUSIBLE_PROBABILITY, checkScalarValues, clip, widestPlausible } from "./bounded.js";
import { DEFAULT_GRID_STEPS, gridSteps } from "./piecewise.js";
import {
  checkKeys,
  plainWordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

/** Largest noise scale in grid steps (laplace.py `MAX_NOISE_SCALE`). */
const MAX_NOISE_SCALE = 2 ** 36;

class Laplace implements Mechanism<number, number> {
  readonly name = "laplace";
  readonly valueKind = "number";
  readonly lower: number;
  readonly upper: number;
  readonly gridSteps: number;
  /** The noise scale t/s in grid steps. */
  readonly t: bigint;
  readonly s: bigint;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "lower", "upper"], ["granularity"]);
    const reader = new ConfigReader(config, this.name);
    const epsilon = reader.epsilon();
    ({ lower: this.lower, upper: this.upper } = reader.bounds());
    const granularity = reader.has("granularity") ? reader.positive("granularity") : null;
    this.gridSteps = gridSteps(this.name, this.upper - this.lower, granularity, DEFAULT_GRID_STEPS);
    if (this.gridSteps / epsilon > MAX_NOISE_SCALE) {
      throw new RangeError(
        `laplace: config.epsilon (${epsilon}) is too small for a grid of ${this.gridSteps} steps ` +
          "(the noise scale would exceed 2**36 steps); use a coarser granularity",
      );
    }
    const rate = floorFraction(Rational.fromDouble(epsilon).div(this.gridSteps), MAX_LAPLACE_DENOMINATOR);
    this.t = rate.den;
    this.s = rate.num;
  }

  perturb(values: readonly number[], options?: PerturbOptions): number[] {
    const rng = plainWordSource(options, this.name);
    const step = (this.upper - this.lower) / this.gridSteps;
    const position = checkScalarValues(values).map((x) => (clip(x, this.lower, this.upper) - this.lower) / step);
    const snapped = randomizedRound(rng, position, this.gridSteps);
    const noise = discreteLaplace(rng, this.t, this.s, snapped.length);
    return snapped.map((a, i) => a + Number(noise[i]));
  }

  /**
   * The widest index of the plausible range [-M, N + M], M the least integer with
   * P[|noise| > M] <= 2^-64: M + 1 >= scale ln(2/((1 + r) p)), r = e^(-1/scale)
   * (Python: `DiscreteLaplace.magnitude_bound`, the same floats).
   */
  largestWirePayload(): number {
    const scale = new Rational(this.t, this.s).toNumber();
    const ratio = expDouble(-1.0 / scale);
    const margin = Math.max(0, Math.ceil(scale * log(2 / ((1 + ratio) * IMPLAUSIBLE_PROBABILITY))));
    return widestPlausible(-margin, this.gridSteps + margin);
  }

  toWire(reports: readonly number[]): unknown[] {
    return [...reports];
  }
}

/** `{"mechanism": "laplace", "epsilon", "lower", "upper"}`, optionally `"granularity"`. */
export function laplace(config: MechanismConfig): Mechanism {
  return new Laplace(config) as Mechanism;
}
