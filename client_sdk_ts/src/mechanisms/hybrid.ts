/**
 * The hybrid mechanism of Wang et al. (ICDE 2019; Python: client_sdk/mechanisms/piecewise.py):
 * one word below T_alpha (alpha = 1 - e^(-eps/2), rounded to nearest; 0 at or below eps* of
 * their Lemma 5) chooses the piecewise kernel, else Duchi's (output N + W + bit).
 */
import { probabilityThreshold } from "../rational.js";
import type { WordSource } from "../words.js";
import { BoundedMechanism, ConfigReader, type UnitKernel } from "./bounded.js";
import { DuchiKernel } from "./duchi.js";
import { PiecewiseKernel, configGridSteps } from "./piecewise.js";
import { checkKeys } from "./fields.js";
import type { Mechanism, MechanismConfig } from "./types.js";

/**
 * eps* ~ 0.6094 (Wang et al. 2019, Lemma 5): at or below it the hybrid mechanism is Duchi's.
 * The double Python computes from the lemma's closed form (its `** (1/3)` and `log`), written
 * out so that no platform's cube root changes it.
 */
export const EPSILON_STAR = 0.6093524930273093;

export class HybridKernel implements UnitKernel {
  readonly piecewise: PiecewiseKernel;
  readonly duchi: DuchiKernel;
  readonly alphaThreshold: bigint;
  readonly outputSize: number;

  constructor(
    readonly epsilon: number,
    steps: number,
  ) {
    this.piecewise = new PiecewiseKernel(epsilon, steps);
    this.duchi = new DuchiKernel(epsilon);
    // -expm1(-eps/2) as Python's math.expm1 (fdlibm's, as V8's Math.expm1)
    this.alphaThreshold =
      epsilon <= EPSILON_STAR ? 0n : probabilityThreshold(-Math.expm1(-epsilon / 2), "nearest");
    this.outputSize = this.piecewise.outputSize + 2;
  }

  sample(rng: WordSource, t: readonly number[]): number[] {
    const choose = rng.words(t.length);
    const usePiecewise = t.map((_, i) => (choose[i] as bigint) < this.alphaThreshold);
    const fromPiecewise = this.piecewise.sample(
      rng,
      t.filter((_, i) => usePiecewise[i]),
    );
    const fromDuchi = this.duchi.sample(
      rng,
      t.filter((_, i) => !usePiecewise[i]),
    );
    let p = 0;
    let d = 0;
    return t.map((_, i) =>
      usePiecewise[i] ? (fromPiecewise[p++] as number) : this.piecewise.outputSize + (fromDuchi[d++] as number),
    );
  }

  variance(t: number): number {
    const alpha = Number(this.alphaThreshold) / 2 ** 64;
    const duchi = this.duchi.variance(t);
    if (alpha === 0) return duchi;
    return alpha * this.piecewise.variance(t) + (1 - alpha) * duchi;
  }
}

/** `{"mechanism": "hybrid", "epsilon", "lower", "upper"}`, optionally `"dim"`, `"coordinates"`, `"granularity"`. */
export function hybrid(config: MechanismConfig): Mechanism {
  checkKeys(config, "hybrid", ["epsilon", "lower", "upper"], ["dim", "coordinates", "granularity"]);
  const reader = new ConfigReader(config, "hybrid");
  const steps = configGridSteps(reader);
  return new BoundedMechanism("hybrid", reader.epsilon(), reader, (epsilon) => new HybridKernel(epsilon, steps));
}
