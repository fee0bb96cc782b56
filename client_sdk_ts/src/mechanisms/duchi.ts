/**
 * Duchi et al.'s two-point mechanism for bounded numbers (Duchi, Jordan & Wainwright, FOCS 2013;
 * in the form of Wang et al., ICDE 2019, section III-A; Python: client_sdk/mechanisms/duchi.py).
 * t is rounded at random to a side s (+1 with probability (1 + t)/2), then the output bit is
 * one word below T_s: T_-1 = ceil(2^64/(e + 1)) for e the double just below e^eps, T_+1 =
 * 2^64 - T_-1, so T_+1/T_-1 <= e^eps exactly.
 */
import { expBelow } from "../exact-math.js";
import { Rational, WORD_SPAN, probabilityThreshold } from "../rational.js";
import { randomizedRound } from "../samplers.js";
import type { WordSource } from "../words.js";
import { BoundedMechanism, ConfigReader, type UnitKernel } from "./bounded.js";
import { checkKeys } from "./fields.js";
import type { Mechanism, MechanismConfig } from "./types.js";

/** Duchi's kernel at `epsilon`: outputs 0 (-B) and 1 (+B). */
export class DuchiKernel implements UnitKernel {
  readonly outputSize = 2;
  /** T_lo: the threshold of P[+B | t = -1], rounded up (at least 1). */
  readonly lowThreshold: bigint;
  /** T_hi = 2^64 - T_lo. */
  readonly highThreshold: bigint;
  /** B = 1/(2 T_hi/2^64 - 1), the decoded magnitude. */
  readonly bound: number;

  constructor(readonly epsilon: number) {
    const e = Rational.fromDouble(expBelow(epsilon));
    const low = probabilityThreshold(new Rational(1n).div(e.add(1n)), "up");
    this.lowThreshold = low > 1n ? low : 1n;
    this.highThreshold = WORD_SPAN - this.lowThreshold;
    this.bound = new Rational(WORD_SPAN, 2n * this.highThreshold - WORD_SPAN).toNumber();
  }

  sample(rng: WordSource, t: readonly number[]): number[] {
    const side = randomizedRound(
      rng,
      t.map((x) => (x + 1) / 2),
      1,
    );
    const words = rng.words(side.length);
    return side.map((s, i) => ((words[i] as bigint) < (s === 1 ? this.highThreshold : this.lowThreshold) ? 1 : 0));
  }

  variance(t: number): number {
    return this.bound ** 2 - t * t;
  }
}

/** `{"mechanism": "duchi", "epsilon", "lower", "upper"}`, optionally `"dim"`, `"coordinates"`. */
export function duchi(config: MechanismConfig): Mechanism {
  checkKeys(config, "duchi", ["epsilon", "lower", "upper"], ["dim", "coordinates"]);
  const reader = new ConfigReader(config, "duchi");
  return new BoundedMechanism("duchi", reader.epsilon(), reader, (epsilon) => new DuchiKernel(epsilon));
}
