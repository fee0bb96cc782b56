/**
 * Reading a canonical config and checking device inputs (Python:
 * `client_sdk.mechanisms._validation`). Errors name the field and the value's type, never a
 * private input's value.
 */
import type { MechanismConfig } from "./types.js";

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
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

/** Python's `max(1, CHUNK_BITS // bits)` rows per chunk of about 2^23 bits. */
export function rowsPerChunk(bitsPerRow: number): number {
  return Math.max(1, Math.floor(2 ** 23 / Math.max(1, bitsPerRow)));
}
