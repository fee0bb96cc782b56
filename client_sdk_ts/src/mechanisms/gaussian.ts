/**
 * The Gaussian mechanism for bounded scalars and L2-clipped vectors, (epsilon, delta)-LDP, with
 * exact discrete Gaussian noise on a grid (Python: client_sdk/mechanisms/gaussian.py and
 * gaussian_calibration.py; docs/protocol.md, "Numbers").
 *
 * sigma is the analytic Gaussian mechanism's (Balle & Wang, ICML 2018, Theorem 8), found by the
 * same doubling, halving and bisection in float64 as Python; the noise is N_Z(0, t m) with
 * t m >= sigma_1^2 + 16^2 (Canonne, Kamath & Steinke, NeurIPS 2020), sigma_1 = sigma in grid
 * steps at the grid sensitivity.
 */
import { discreteGaussian, discreteGaussianAtLeast, MAX_GAUSSIAN_T } from "../sampling.js";
import { randomizedRound } from "../samplers.js";
import { ConfigReader, IMPLAUSIBLE_PROBABILITY, MAX_DIM, checkScalarValues, checkVectorValues, clip, widestPlausible } from "./bounded.js";
import { log } from "./correctly-rounded.js";
import { gridSteps } from "./piecewise.js";
import {
  checkKeys,
  plainWordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const SIGMA_GRID_BITS = 22;
const SMOOTHING_SIGMA = 16;
const MIN_GRID_SIGMA = 64;
const RELATIVE_TOLERANCE = 1e-12;
const MAX_STEPS = 4000;
const LEAST_NORMAL = 2.2250738585072014e-308;
const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/**
 * erfc(x) to within a few ulps: 1 - erf(x) from the series with positive terms
 * erf(x) = 2/sqrt(pi) e^(-x^2) sum 2^n x^(2n+1)/(1·3···(2n+1)) below 2, the continued fraction
 * erfc(x) = e^(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))) above (Abramowitz &
 * Stegun 7.1.6 and 7.1.14), with e^(-x^2) from an exact split of x^2. The calibration's
 * bisection needs far less (its decisions move at a relative 1e-11 of delta).
 */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return 2 - erfc(-x);
  if (x === Infinity) return 0;
  if (x > 27.3) return 0;
  // e^(-x^2) with x = hi + lo, hi of 26 bits so that hi^2 is exact
  const c = 134217729 * x;
  const hi = c - (c - x);
  const lo = x - hi;
  const gauss = Math.exp(-hi * hi) * Math.exp(-(2 * hi + lo) * lo);
  if (x < 2) {
    let term = x;
    let sum = x;
    for (let n = 1; term > sum * 1e-17; n++) {
      term *= (2 * x * x) / (2 * n + 1);
      sum += term;
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * gauss * sum;
  }
  // modified Lentz for x + a_1/(x + a_2/(x + ...)), a_n = n/2
  const tiny = 1e-300;
  let f = x;
  let cc = x;
  let d = 0;
  for (let n = 1; n < 5000; n++) {
    const a = n / 2;
    d = x + a * d;
    d = d === 0 ? tiny : d;
    cc = x + a / cc;
    cc = cc === 0 ? tiny : cc;
    d = 1 / d;
    const delta = cc * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-17) break;
  }
  return gauss / Math.sqrt(Math.PI) / f;
}

/** log Phi(x) (gaussian_calibration.py `log_normal_cdf`). */
export function logNormalCdf(x: number): number {
  if (x > 0) return Math.log1p(-0.5 * erfc(x / Math.SQRT2));
  if (x > -20) return Math.log(0.5 * erfc(-x / Math.SQRT2));
  if (x === -Infinity) return -Infinity;
  const inverseSquare = 1 / (x * x);
  let term = 1;
  let series = 1;
  for (let n = 1; n < 13; n++) {
    term *= -(2 * n - 1) * inverseSquare;
    series += term;
  }
  return -0.5 * x * x - Math.log(-x) - LOG_SQRT_2PI + Math.log(series);
}

/** Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) (Balle & Wang 2018, Theorem 8). */
export function analyticGaussianDelta(sigma: number, epsilon: number, sensitivity: number): number {
  const a = sensitivity / (2 * sigma) - (epsilon * sigma) / sensitivity;
  const b = -sensitivity / (2 * sigma) - (epsilon * sigma) / sensitivity;
  const logA = logNormalCdf(a);
  const exponent = epsilon + logNormalCdf(b) - logA;
  if (exponent >= 0) return 0;
  return Math.exp(logA) * -Math.expm1(exponent);
}

/** The smallest sigma (relative 1e-12, rounded up) meeting (epsilon, delta) at the sensitivity. */
export function analyticGaussianSigma(epsilon: number, delta: number, sensitivity: number): number {
  const holds = (s: number): boolean => analyticGaussianDelta(s, epsilon, sensitivity) <= delta;
  let high = sensitivity;
  let steps = 0;
  while (!holds(high)) {
    high *= 2;
    if (++steps > MAX_STEPS) throw new RangeError(`gaussian: no finite sigma reaches config.delta (${delta})`);
  }
  let low = high / 2;
  while (holds(low)) {
    [high, low] = [low, low / 2];
    if (low === 0) throw new RangeError("gaussian: cannot bracket sigma");
  }
  for (let i = 0; i < MAX_STEPS; i++) {
    if (high - low <= RELATIVE_TOLERANCE * high) return high;
    const middle = 0.5 * (low + high);
    if (middle <= low || middle >= high) return high;
    if (holds(middle)) high = middle;
    else low = middle;
  }
  return high;
}

/** The textbook sigma = D sqrt(2 ln(1.25/delta))/eps, valid for eps < 1 (Dwork & Roth 2014). */
export function classicGaussianSigma(epsilon: number, delta: number, sensitivity: number): number {
  if (epsilon >= 1) {
    throw new RangeError(
      `gaussian: the classic calibration is valid only for config.epsilon < 1, got ${epsilon}; use "analytic"`,
    );
  }
  return (sensitivity * Math.sqrt(2 * Math.log(1.25 / delta))) / epsilon;
}

type GaussianReport = number | number[];

class Gaussian implements Mechanism<number | readonly number[], GaussianReport> {
  readonly name = "gaussian";
  readonly valueKind = "number";
  readonly lower: number | null = null;
  readonly upper: number | null = null;
  readonly dim: number | null = null;
  readonly clipNorm: number | null = null;
  readonly sigma: number;
  readonly gridSteps: number | null;
  readonly gridStep: number;
  readonly t: bigint;
  readonly m: bigint;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "delta"], ["lower", "upper", "dim", "clip_norm", "calibration", "granularity"]);
    const reader: ConfigReader = new ConfigReader(config, this.name);
    const epsilon = reader.epsilon();
    const delta = reader.config["delta"];
    if (typeof delta !== "number" || !(delta > 0 && delta < 1)) reader.fail("delta", "a number in (0, 1)");
    const scalar = reader.has("lower") || reader.has("upper");
    const vector = reader.has("dim") || reader.has("clip_norm");
    if (scalar && vector) {
      throw new RangeError("gaussian: config takes lower/upper (a scalar) or dim/clip_norm (a vector), not both");
    }
    let sensitivity: number;
    if (scalar) {
      ({ lower: this.lower, upper: this.upper } = reader.bounds());
      sensitivity = this.upper - this.lower;
    } else if (vector) {
      if (!reader.has("dim") || !reader.has("clip_norm")) {
        throw new RangeError("gaussian: a vector config needs both config.dim and config.clip_norm");
      }
      this.dim = reader.integer("dim", 1, MAX_DIM);
      this.clipNorm = reader.positive("clip_norm");
      sensitivity = 2 * this.clipNorm;
    } else {
      throw new RangeError("gaussian: config needs lower and upper (a scalar) or dim and clip_norm (a vector)");
    }
    const calibration = reader.has("calibration") ? reader.config["calibration"] : "analytic";
    if (calibration !== "analytic" && calibration !== "classic") {
      reader.fail("calibration", '"analytic" or "classic"');
    }
    const granularity = reader.has("granularity") ? reader.positive("granularity") : null;
    this.sigma =
      calibration === "classic"
        ? classicGaussianSigma(epsilon, delta, sensitivity)
        : analyticGaussianSigma(epsilon, delta, sensitivity);
    let gridSensitivity: number;
    if (this.dim === null) {
      const fallback = Math.ceil((sensitivity * 2 ** SIGMA_GRID_BITS) / this.sigma);
      this.gridSteps = gridSteps(this.name, sensitivity, granularity, fallback);
      this.gridStep = sensitivity / this.gridSteps;
      gridSensitivity = this.gridSteps;
    } else {
      this.gridSteps = null;
      this.gridStep = granularity ?? this.sigma / 2 ** SIGMA_GRID_BITS;
      const radius = ((this.clipNorm as number) / this.gridStep) * (1 + 2 ** -40);
      gridSensitivity = 2 * radius + 2 * Math.sqrt(this.dim);
    }
    const sigma1 = (this.sigma * gridSensitivity) / sensitivity;
    if (sigma1 < MIN_GRID_SIGMA) {
      throw new RangeError(`gaussian: config.granularity is too coarse: the grid step must be at most sigma/${MIN_GRID_SIGMA}`);
    }
    if (sigma1 > MAX_GAUSSIAN_T * 0.99) {
      throw new RangeError("gaussian: config.granularity is too fine: the grid step must be at least sigma/2**23");
    }
    ({ t: this.t, m: this.m } = discreteGaussianAtLeast(sigma1 ** 2 + SMOOTHING_SIGMA ** 2));
  }

  perturb(values: readonly (number | readonly number[])[], options?: PerturbOptions): GaussianReport[] {
    const rng = plainWordSource(options, this.name);
    if (this.dim === null) {
      const lower = this.lower as number;
      const upper = this.upper as number;
      const position = checkScalarValues(values).map((x) => (clip(x, lower, upper) - lower) / this.gridStep);
      const snapped = randomizedRound(rng, position, this.gridSteps ?? undefined);
      const noise = discreteGaussian(rng, this.t, this.m, snapped.length);
      return snapped.map((a, i) => a + Number(noise[i]));
    }
    const dim = this.dim;
    const clipNorm = this.clipNorm as number;
    const positions = checkVectorValues(values, dim).flatMap((x) => {
      let squares = 0;
      for (const v of x) squares += v * v;
      const shrink = Math.min(1, clipNorm / Math.max(Math.sqrt(squares), LEAST_NORMAL));
      const factor = shrink / this.gridStep;
      return x.map((v) => v * factor);
    });
    const snapped = randomizedRound(rng, positions);
    const noise = discreteGaussian(rng, this.t, this.m, snapped.length);
    const out: number[][] = [];
    for (let i = 0; i < snapped.length; i += dim) {
      out.push(snapped.slice(i, i + dim).map((a, j) => a + Number(noise[i + j])));
    }
    return out;
  }

  /**
   * The widest index of the plausible range (per coordinate): the grid [0, N] or the clipped
   * ball's [-largest, largest], widened by M = ceil(sigma sqrt(2 ln(2/p))), the subgaussian
   * tail bound at p = 2^-64 (per coordinate: 2^-64/dim) (Python: `DiscreteGaussian.magnitude_bound`).
   */
  largestWirePayload(): number | number[] {
    const sigma2 = Number(this.t * this.m);
    const margin = (p: number): number => Math.max(0, Math.ceil(Math.sqrt(2.0 * sigma2 * log(2 / p))));
    if (this.dim === null) {
      const m = margin(IMPLAUSIBLE_PROBABILITY);
      return widestPlausible(-m, (this.gridSteps as number) + m);
    }
    const m = margin(IMPLAUSIBLE_PROBABILITY / this.dim);
    const largest = Math.ceil(((this.clipNorm as number) / this.gridStep) * (1 + 2 ** -40));
    return new Array<number>(this.dim).fill(widestPlausible(-(largest + m), largest + m));
  }

  toWire(reports: readonly GaussianReport[]): unknown[] {
    return reports.map((report) => (typeof report === "number" ? report : [...report]));
  }
}

/**
 * `{"mechanism": "gaussian", "epsilon", "delta", "lower", "upper"}` or with `"dim"` and
 * `"clip_norm"`; optionally `"calibration"` ("analytic" or "classic") and `"granularity"`.
 */
export function gaussian(config: MechanismConfig): Mechanism {
  return new Gaussian(config) as Mechanism;
}
