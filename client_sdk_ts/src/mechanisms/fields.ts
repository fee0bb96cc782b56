/**
 * Reading a canonical config and checking device inputs (Python:
 * `client_sdk.mechanisms._validation`). Errors name the field and the value's type, never a
 * private input's value.
 */
import { CryptoWordSource, type WordSource } from "../words.js";
import type { MechanismConfig, PerturbOptions } from "./types.js";

/** The type of a value for an error message (never the value: it may be a private input). */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : "an infinite number";
  return typeof value;
}

/** The report's word source: the caller's, else the platform CSPRNG. */
export function wordSource(options: PerturbOptions | undefined): WordSource {
  return options?.rng ?? new CryptoWordSource();
}

/** Refuses the device's keyed source where a mechanism has no memoized or per-device draw
 * (Python's plain perturb takes no ``permanent``): a caller passing one expects memoization. */
export function refuseKeys(options: PerturbOptions | undefined, name: string): void {
  if (options?.keys !== undefined) throw new TypeError(`${name} is not memoized; it takes no keys`);
}

/** The word source of a mechanism without per-device draws, which refuses a keyed source. */
export function plainWordSource(options: PerturbOptions | undefined, name: string): WordSource {
  refuseKeys(options, name);
  return wordSource(options);
}

/** Refuses missing and unknown keys of a config, naming them. */
export function checkKeys(
  config: MechanismConfig,
  name: string,
  required: readonly string[],
  optional: readonly string[] = [],
): void {
  const missing = required.filter((key) => !Object.hasOwn(config, key));
  if (missing.length > 0) throw new TypeError(`config for ${JSON.stringify(name)} is missing ${missing.sort().join(", ")}`);
  const known = new Set(["mechanism", ...required, ...optional]);
  const unknown = Object.keys(config).filter((key) => !known.has(key));
  if (unknown.length > 0) throw new TypeError(`config for ${JSON.stringify(name)} has unknown field(s) ${unknown.sort().join(", ")}`);
}

/** An integer field in [minimum, maximum]. */
export function configInt(
  config: Readonly<Record<string, unknown>>,
  field: string,
  minimum: number,
  maximum: number = Number.MAX_SAFE_INTEGER,
): number {
  const value = config[field];
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new TypeError(`${field} must be an integer; got ${typeName(value)}`);
  }
  if (value < minimum || value > maximum) throw new RangeError(`${field} must be in [${minimum}, ${maximum}]; got ${value}`);
  return value;
}

/** A finite number field (a float in the config). */
export function configNumber(config: Readonly<Record<string, unknown>>, field: string): number {
  const value = config[field];
  if (typeof value !== "number" || !Number.isFinite(value)) throw new TypeError(`${field} must be a finite number; got ${typeName(value)}`);
  return value;
}

/** An epsilon: a finite number > 0 (at most 700 so that e^eps stays a float64). */
export function configEpsilon(config: Readonly<Record<string, unknown>>, field = "epsilon"): number {
  const value = configNumber(config, field);
  if (!(value > 0) || value > 700) throw new RangeError(`${field} must be in (0, 700]; got ${value}`);
  return value;
}

/** A boolean field, `fallback` when absent. */
export function configBool(config: Readonly<Record<string, unknown>>, field: string, fallback: boolean): boolean {
  const value = config[field] ?? fallback;
  if (typeof value !== "boolean") throw new TypeError(`${field} must be true or false; got ${typeName(value)}`);
  return value;
}

/** An object field. */
export function configObject(config: Readonly<Record<string, unknown>>, field: string): Readonly<Record<string, unknown>> {
  const value = config[field];
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${field} must be an object; got ${typeName(value)}`);
  }
  return value as Readonly<Record<string, unknown>>;
}

/** The ``"longitudinal"`` field's epsilon_permanent (at least epsilon), or undefined; `optional`: the
 * other fields it may have (a frequency oracle's `allow_pseudonym`). */
export function configPermanent(config: MechanismConfig, epsilon: number, optional: readonly string[] = []): number | undefined {
  if (config.longitudinal === undefined) return undefined;
  const settings = configObject(config, "longitudinal");
  const unknown = Object.keys(settings).filter((key) => key !== "epsilon_permanent" && !optional.includes(key));
  if (unknown.length > 0) throw new TypeError(`longitudinal has unknown field(s) ${unknown.sort().join(", ")}`);
  const permanent = configEpsilon(settings, "epsilon_permanent");
  if (permanent < epsilon) {
    throw new RangeError(
      "longitudinal.epsilon_permanent must be >= epsilon (one report can never reveal more than all reports); " +
        `got ${permanent} < ${epsilon}`,
    );
  }
  return permanent;
}

/** Categorical inputs: integers in [0, k). The error names the index and the type only. */
export function categoryValues(values: readonly unknown[], k: number, field = "values"): number[] {
  if (!Array.isArray(values)) throw new TypeError(`${field} must be an array of integers; got ${typeName(values)}`);
  return values.map((value, i) => {
    if (typeof value !== "number" || !Number.isSafeInteger(value)) {
      throw new TypeError(`${field}[${i}] must be an integer in [0, ${k}); got ${typeName(value)}`);
    }
    if (value < 0 || value >= k) throw new RangeError(`${field}[${i}] must be in [0, ${k}); got a number out of range`);
    return value;
  });
}

/** String inputs. */
export function stringValues(values: readonly unknown[], field = "values"): string[] {
  if (!Array.isArray(values)) throw new TypeError(`${field} must be an array of strings; got ${typeName(values)}`);
  return values.map((value, i) => {
    if (typeof value !== "string") throw new TypeError(`${field}[${i}] must be a string; got ${typeName(value)}`);
    return value;
  });
}

const UTF8 = new TextEncoder();

/** The first of `payloads` with the longest compact JSON in UTF-8 (Python:
 * `max(payloads, key=wire_length)`): the widest report of a mechanism with several parts. */
export function widestPayload<T>(payloads: readonly T[]): T {
  let best = payloads[0] as T;
  let bestLength = -1;
  for (const payload of payloads) {
    const length = UTF8.encode(JSON.stringify(payload)).length;
    if (length > bestLength) [best, bestLength] = [payload, length];
  }
  return best;
}

/** Python's `max(1, CHUNK_BITS // bits)` rows per chunk of about 2^23 bits. */
export function rowsPerChunk(bitsPerRow: number): number {
  return Math.max(1, Math.floor(2 ** 23 / Math.max(1, bitsPerRow)));
}
