/**
 * The piecewise mechanism of Wang et al. (ICDE 2019) on an integer grid (Python:
 * client_sdk/mechanisms/piecewise.py; docs/protocol.md, "Numbers"): t is snapped by randomized
 * rounding to a in {0..N}; with probability P_in = W e/(W e + N) (e just below e^eps, rounded
 * down to a threshold) the output is uniform on the window {a..a+W-1}, else uniform on the N
 * other outputs; W = round(N e^(-eps/2)).
 */
import { expBelow, roundHalfEven } from "../exact-math.js";
import { Rational, WORD_SPAN, expDouble, probabilityThreshold } from "../rational.js";
import { randomizedRound, uniformBelow } from "../samplers.js";
import type { WordSource } from "../words.js";
import { BoundedMechanism, ConfigReader, type UnitKernel } from "./bounded.js";
import { checkKeys } from "./fields.js";
import type { Mechanism, MechanismConfig } from "./types.js";

/** Scalar grids default to 2^20 steps (client_sdk/mechanisms/grid.py). */
export const DEFAULT_GRID_STEPS = 1 << 20;
const MAX_GRID_STEPS = 2 ** 40;

/**
 * N grid steps over a width: the default, or ceil(width/granularity) with a ratio within 1e-9
 * of an integer counting as it (grid.py `grid_steps`).
 */
export function gridSteps(mechanism: string, width: number, granularity: number | null, defaultSteps: number): number {
  if (granularity === null) return defaultSteps;
  const ratio = width / granularity;
  const nearest = roundHalfEven(ratio);
  const steps = Math.abs(ratio - nearest) <= 1e-9 * Math.max(1, ratio) ? nearest : Math.ceil(ratio);
  if (!(steps >= 1 && steps <= MAX_GRID_STEPS)) {
    throw new RangeError(
      `${mechanism}: config.granularity must give between 1 and 2**40 grid steps over the range (${width}), got ${granularity}`,
    );
  }
  return steps;
}

const sumTo = (n: number): number => (n * (n + 1)) / 2;
const squaresTo = (n: number): number => (n * (n + 1) * (2 * n + 1)) / 6;

/** The piecewise kernel with N steps and window W (Square Wave gives its own W). */
export class PiecewiseKernel implements UnitKernel {
  readonly window: number;
  readonly outputSize: number;
  /** The threshold of P_in, rounded down. */
  readonly insideThreshold: bigint;
  readonly #levels: { high: number; diff: number; low: number; slope: number };

  constructor(
    readonly epsilon: number,
    readonly steps: number,
    window?: number,
  ) {
    this.window = window ?? Math.max(1, roundHalfEven(steps * expDouble(-epsilon / 2)));
    this.outputSize = steps + this.window;
    const we = Rational.fromDouble(expBelow(epsilon)).mul(this.window);
    this.insideThreshold = probabilityThreshold(we.div(we.add(steps)), "down");
    const w = BigInt(this.window);
    const n = BigInt(steps);
    // p_hi = P_in/W, p_lo = (1 - P_in)/N as exact fractions over W N 2^64, then as doubles
    const t = this.insideThreshold;
    const den = w * n * WORD_SPAN;
    const highN = t * n;
    const lowN = (WORD_SPAN - t) * w;
    this.#levels = {
      high: new Rational(highN, den).toNumber(),
      diff: new Rational(highN - lowN, den).toNumber(),
      low: new Rational(lowN, den).toNumber(),
      slope: new Rational(w * (highN - lowN), den).toNumber(),
    };
  }

  sample(rng: WordSource, t: readonly number[]): number[] {
    const n = t.length;
    const a = randomizedRound(
      rng,
      t.map((x) => ((x + 1) / 2) * this.steps),
      this.steps,
    );
    const inside = rng.words(n);
    const inWindow = uniformBelow(rng, BigInt(this.window), n);
    const other = uniformBelow(rng, BigInt(this.steps), n);
    return a.map((ai, i) => {
      if ((inside[i] as bigint) < this.insideThreshold) return ai + Number(inWindow[i]);
      const o = Number(other[i]);
      return o < ai ? o : o + this.window;
    });
  }

  /** Var[(j - kappa)/slope | a] for a grid input a (piecewise.py `grid_variance`). */
  gridVariance(a: number): number {
    const { diff, low, slope } = this.#levels;
    const w = this.window;
    const top = this.outputSize - 1 - a;
    const first = (diff * (w - 1) * w) / 2 + low * (sumTo(top) - sumTo(a));
    const second = diff * squaresTo(w - 1) + low * (squaresTo(top) + squaresTo(a));
    return (second - first * first) / slope ** 2;
  }

  variance(t: number): number {
    const u = Math.min(Math.max(((t + 1) / 2) * this.steps, 0), this.steps);
    const base = Math.min(Math.floor(u), this.steps - 1);
    const phi = u - base;
    const grid = (1 - phi) * this.gridVariance(base) + phi * this.gridVariance(base + 1);
    return (2 / this.steps) ** 2 * (grid + phi * (1 - phi));
  }
}

/** The grid steps of a piecewise or hybrid config (`granularity` optional). */
export function configGridSteps(reader: ConfigReader): number {
  const { lower, upper } = reader.bounds();
  const granularity = reader.has("granularity") ? reader.positive("granularity") : null;
  return gridSteps(reader.mechanism, upper - lower, granularity, DEFAULT_GRID_STEPS);
}

/** `{"mechanism": "piecewise", "epsilon", "lower", "upper"}`, optionally `"dim"`, `"coordinates"`, `"granularity"`. */
export function piecewise(config: MechanismConfig): Mechanism {
  checkKeys(config, "piecewise", ["epsilon", "lower", "upper"], ["dim", "coordinates", "granularity"]);
  const reader = new ConfigReader(config, "piecewise");
  const steps = configGridSteps(reader);
  return new BoundedMechanism("piecewise", reader.epsilon(), reader, (epsilon) => new PiecewiseKernel(epsilon, steps));
}
