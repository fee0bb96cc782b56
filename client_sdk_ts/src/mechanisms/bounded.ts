/**
 * What the numeric mechanisms share (Python: client_sdk/mechanisms/numeric.py, numeric_checks.py,
 * _validation.py): checks of config fields and of values, the map of a bounded value to
 * t in [-1, 1], and bounded mechanisms built from a kernel on [-1, 1], scalar or vector with
 * coordinate sampling (Wang et al., ICDE 2019, Algorithm 4; docs/protocol.md, "Numbers").
 */
import { sampleSubsets } from "../samplers.js";
import { widestInt } from "../wire.js";
import type { WordSource } from "../words.js";
import { plainWordSource, typeName } from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

/** The largest epsilon a mechanism is built with (client_sdk/mechanisms/_validation.py). */
export const MAX_EPSILON = 40;
/** The largest vector dimension (client_sdk/mechanisms/numeric_checks.py). */
export const MAX_DIM = 1 << 16;

/** An honest report falls outside a noise mechanism's plausible range with at most this
 * probability (Python: `_wire.IMPLAUSIBLE_PROBABILITY`). */
export const IMPLAUSIBLE_PROBABILITY = 2 ** -64;
/** Integers a signed payload may hold: |x| < 2^53 (Python: `_wire.SIGNED_WIRE_LIMIT`). */
const SIGNED_WIRE_LIMIT = 2 ** 53;

/** The widest integer of the plausible range [low, high], clipped to the signed wire limit
 * (Python: `widest_int(*plausible_range)` of laplace and gaussian). */
export function widestPlausible(low: number, high: number): number {
  return widestInt(Math.max(1 - SIGNED_WIRE_LIMIT, low), Math.min(SIGNED_WIRE_LIMIT - 1, high) + 1);
}


/** Config field access that names the mechanism and the field at fault. */
export class ConfigReader {
  constructor(
    readonly config: MechanismConfig,
    readonly mechanism: string,
  ) {}

  has(field: string): boolean {
    return Object.hasOwn(this.config, field) && this.config[field] !== null && this.config[field] !== undefined;
  }

  fail(field: string, expected: string): never {
    const value = this.config[field];
    const shown = typeof value === "number" && Number.isFinite(value) ? ` (${value})` : "";
    throw new RangeError(`${this.mechanism}: config.${field} must be ${expected}, got ${typeName(value)}${shown}`);
  }

  /** A finite number. */
  finite(field: string): number {
    const value = this.config[field];
    if (typeof value !== "number" || !Number.isFinite(value)) this.fail(field, "a finite number");
    return value;
  }

  /** A positive finite number. */
  positive(field: string): number {
    const value = this.config[field];
    if (typeof value !== "number" || !Number.isFinite(value) || !(value > 0)) {
      this.fail(field, "a positive finite number");
    }
    return value;
  }

  /** An epsilon in (0, 40]. */
  epsilon(field = "epsilon"): number {
    const value = this.config[field];
    if (typeof value !== "number" || !Number.isFinite(value) || !(value > 0) || value > MAX_EPSILON) {
      this.fail(field, `a positive number at most ${MAX_EPSILON}`);
    }
    return value;
  }

  /** An integer in [minimum, maximum]. */
  integer(field: string, minimum: number, maximum: number): number {
    const value = this.config[field];
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < minimum || value > maximum) {
      this.fail(field, `an integer in [${minimum}, ${maximum}]`);
    }
    return value;
  }

  /** A boolean. */
  boolean(field: string): boolean {
    const value = this.config[field];
    if (typeof value !== "boolean") this.fail(field, "true or false");
    return value;
  }

  /** Finite bounds with upper > lower and a finite width. */
  bounds(): { lower: number; upper: number } {
    const lower = this.finite("lower");
    const upper = this.finite("upper");
    if (!(upper > lower) || !Number.isFinite(upper - lower)) {
      throw new RangeError(`${this.mechanism}: config.upper must be greater than config.lower by a finite width`);
    }
    return { lower, upper };
  }
}

/** A finite number (a value's coordinate); the error names the field and the value's type. */
export function checkNumber(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TypeError(`${field} must be a finite number, got ${typeName(value)}`);
  }
  return value;
}

/** The array of values a `perturb` call takes. */
export function checkValueList(values: unknown): readonly unknown[] {
  if (!Array.isArray(values)) throw new TypeError(`values must be an array, got ${typeName(values)}`);
  return values;
}

/** Scalar values: finite numbers. */
export function checkScalarValues(values: unknown): number[] {
  return checkValueList(values).map((value, i) => checkNumber(value, `values[${i}]`));
}

/** Vector values: arrays of `dim` finite numbers. */
export function checkVectorValues(values: unknown, dim: number): number[][] {
  return checkValueList(values).map((value, i) => {
    if (!Array.isArray(value) || value.length !== dim) {
      const got = Array.isArray(value) ? `an array of length ${value.length}` : typeName(value);
      throw new TypeError(`values[${i}] must be an array of ${dim} numbers, got ${got}`);
    }
    return value.map((x: unknown, j) => checkNumber(x, `values[${i}][${j}]`));
  });
}



/** clip(x, low, high) as numpy's `np.clip`. */
export function clip(x: number, low: number, high: number): number {
  return Math.min(Math.max(x, low), high);
}

/** A one-dimensional randomizer of t in [-1, 1] with integer outputs in [0, outputSize). */
export interface UnitKernel {
  readonly outputSize: number;
  /** One output per t, every step over the whole batch (Python's vectorized order). */
  sample(rng: WordSource, t: readonly number[]): number[];
  /** The exact variance of the unbiased estimate of t from one output (for the choice of k). */
  variance(t: number): number;
}

/** Inputs over which the worst-case variance is maximized (numpy `linspace(-1, 1, 2001)`). */
const WORST_CASE_GRID: readonly number[] = Array.from({ length: 2001 }, (_, i) => (i === 2000 ? 1 : i * 0.001 - 1));

/** max over t of (d/k)(v(t) + t^2) - t^2, in units of t (numeric.py `_sampled_worst_case`). */
function sampledWorstCase(kernel: UnitKernel, d: number, k: number): number {
  let worst = -Infinity;
  for (const t of WORST_CASE_GRID) worst = Math.max(worst, (d / k) * (kernel.variance(t) + t * t) - t * t);
  return worst;
}

/** A bounded mechanism's report: the kernel's output, or the sampled [coordinate, output] pairs. */
export type BoundedReport = number | Array<[number, number]>;

/**
 * Scalars on [lower, upper] or vectors in [lower, upper]^dim through a kernel (numeric.py
 * `BoundedMechanism`): t = clip((x - mid)/half, -1, 1), mid = lower + half. Vectors sample k of
 * the dim coordinates (`sample_subsets`) and run the kernel at epsilon/k once over the n·k
 * chosen coordinates in row order.
 */
export class BoundedMechanism implements Mechanism<number | readonly number[], BoundedReport> {
  readonly valueKind = "number";
  readonly lower: number;
  readonly upper: number;
  readonly dim: number | null;
  readonly sampledCoordinates: number;
  readonly kernel: UnitKernel;

  constructor(
    readonly name: string,
    readonly epsilon: number,
    reader: ConfigReader,
    makeKernel: (epsilon: number) => UnitKernel,
  ) {
    ({ lower: this.lower, upper: this.upper } = reader.bounds());
    this.dim = reader.has("dim") ? reader.integer("dim", 1, MAX_DIM) : null;
    if (reader.has("coordinates") && this.dim === null) {
      throw new RangeError(`${name}: config.coordinates (how many coordinates a report samples) needs config.dim`);
    }
    if (this.dim === null) {
      this.sampledCoordinates = 1;
    } else if (reader.has("coordinates")) {
      this.sampledCoordinates = reader.integer("coordinates", 1, this.dim);
    } else {
      this.sampledCoordinates = bestCoordinates(epsilon, this.dim, makeKernel);
    }
    this.kernel = makeKernel(this.dim === null ? epsilon : epsilon / this.sampledCoordinates);
  }

  /** Clip to [lower, upper] and map to [-1, 1]. */
  toUnit(x: number): number {
    const half = (this.upper - this.lower) / 2;
    return clip((x - (this.lower + half)) / half, -1, 1);
  }

  perturb(values: readonly (number | readonly number[])[], options?: PerturbOptions): BoundedReport[] {
    const rng = plainWordSource(options, this.name);
    if (this.dim === null) {
      return this.kernel.sample(rng, checkScalarValues(values).map((x) => this.toUnit(x)));
    }
    const vectors = checkVectorValues(values, this.dim);
    const k = this.sampledCoordinates;
    const coordinates = sampleSubsets(rng, vectors.length, this.dim, k);
    const chosen = vectors.flatMap((row, i) => (coordinates[i] as number[]).map((c) => this.toUnit(row[c] as number)));
    const outputs = this.kernel.sample(rng, chosen);
    return coordinates.map((row, i) => row.map((c, j): [number, number] => [c, outputs[i * k + j] as number]));
  }

  /** The widest payload (Python: `largest_wire_payload`): an output, or k (coordinate, output) pairs. */
  largestWirePayload(): number | [number, number][] {
    const widest = widestInt(0, this.kernel.outputSize);
    if (this.dim === null) return widest;
    return Array.from({ length: this.sampledCoordinates }, (): [number, number] => [widestInt(0, this.dim as number), widest]);
  }

  toWire(reports: readonly BoundedReport[]): unknown[] {
    return reports.map((report) => (typeof report === "number" ? report : report.map(([c, o]) => [c, o])));
  }
}

/**
 * The k in [1, min(dim, floor(epsilon) + 1)] minimizing the worst-case per-coordinate variance,
 * ties to the smaller k (numeric.py `best_coordinates`): the canonical config omits k when it
 * is this default.
 */
function bestCoordinates(epsilon: number, dim: number, makeKernel: (epsilon: number) => UnitKernel): number {
  let bestK = 1;
  let bestValue = Infinity;
  for (let k = 1; k <= Math.min(dim, Math.floor(epsilon) + 1); k++) {
    const value = sampledWorstCase(makeKernel(epsilon / k), dim, k);
    if (value < bestValue * (1 - 1e-12)) {
      bestK = k;
      bestValue = value;
    }
  }
  return bestK;
}
