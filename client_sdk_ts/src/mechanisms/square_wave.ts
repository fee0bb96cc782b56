/**
 * Square Wave reporting (Li, Wang, Lopuhaa-Zwakenberg, Li & Skoric, SIGMOD 2020; Python:
 * client_sdk/mechanisms/square_wave.py): the piecewise kernel's integer construction with
 * N = bins · ceil(1024/bins) steps and the window W = max(1, round(2 b N)),
 * b = (eps e - e + 1)/(2 e (e - 1 - eps)) with e = e^eps.
 */
import { roundHalfEven } from "../exact-math.js";
import { expDouble } from "../rational.js";
import { widestInt } from "../wire.js";
import { ConfigReader, checkScalarValues, clip } from "./bounded.js";
import { PiecewiseKernel } from "./piecewise.js";
import {
  checkKeys,
  plainWordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const EMS_GRID = 1024;
const MAX_BINS = 4096;

/** The paper's half-width b(eps) (Li et al. 2020). */
export function squareWaveB(epsilon: number): number {
  const e = expDouble(epsilon);
  return (epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon));
}

class SquareWave implements Mechanism<number, number> {
  readonly name = "square_wave";
  readonly valueKind = "number";
  readonly kernel: PiecewiseKernel;
  readonly lower: number;
  readonly upper: number;

  constructor(config: MechanismConfig) {
    checkKeys(config, this.name, ["epsilon", "lower", "upper", "bins"]);
    const reader = new ConfigReader(config, this.name);
    const epsilon = reader.epsilon();
    ({ lower: this.lower, upper: this.upper } = reader.bounds());
    const bins = reader.integer("bins", 2, MAX_BINS);
    const steps = bins * Math.max(1, Math.ceil(EMS_GRID / bins));
    const window = Math.max(1, roundHalfEven(2 * squareWaveB(epsilon) * steps));
    this.kernel = new PiecewiseKernel(epsilon, steps, window);
  }

  perturb(values: readonly number[], options?: PerturbOptions): number[] {
    // mid = (lower + upper)/2 here, not lower + half: the doubles can differ in the last bit
    const mid = (this.lower + this.upper) / 2;
    const half = (this.upper - this.lower) / 2;
    const t = checkScalarValues(values).map((x) => clip((x - mid) / half, -1, 1));
    return this.kernel.sample(plainWordSource(options, this.name), t);
  }

  /** The widest payload (Python: `largest_wire_payload`): an output of the kernel. */
  largestWirePayload(): number {
    return widestInt(0, this.kernel.outputSize);
  }

  toWire(reports: readonly number[]): unknown[] {
    return [...reports];
  }
}

/** `{"mechanism": "square_wave", "epsilon", "lower", "upper", "bins"}`. */
export function squareWave(config: MechanismConfig): Mechanism {
  return new SquareWave(config) as Mechanism;
}
