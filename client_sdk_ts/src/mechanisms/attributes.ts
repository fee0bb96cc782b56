/**
 * The attributes of a record mechanism (`multi`, `fourier`), read once for both (Python:
 * client_sdk/mechanisms/attributes.py): a config lists them as `[{name, k, labels?}, ...]`
 * (`fourier`'s are binary and may omit `k`); a device's record is an object attribute -> label
 * (or -> index, for an attribute without labels), or the indices in the config's order.
 */
import { typeName } from "./fields.js";

/** The most attributes of one config. */
export const MAX_ATTRIBUTES = 64;
/** The largest k of one attribute (and, in `multi`, the most cells of one table). */
export const MAX_K = 1 << 12;

/** A parsed attribute: its name, k and, optionally, its labels (label -> index). */
export interface Attribute {
  readonly name: string;
  readonly k: number;
  readonly labels: ReadonlyMap<string, number> | null;
}

/**
 * The config's `attributes`, validated; errors name the entry and the field, and the type of
 * what is wrong. `binary`: k is 2 and may be omitted (Fourier marginals).
 */
export function parseAttributes(attributes: unknown, binary = false): Attribute[] {
  if (!Array.isArray(attributes) || attributes.length < 1 || attributes.length > MAX_ATTRIBUTES) {
    const got = Array.isArray(attributes) ? `${attributes.length} entries` : typeName(attributes);
    throw new RangeError(`attributes must be a list of 1 to ${MAX_ATTRIBUTES} {name, k}; got ${got}`);
  }
  const names = new Set<string>();
  return attributes.map((entry: unknown, index): Attribute => {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      throw new TypeError(`attributes[${index}] must be an object {name, k}; got ${typeName(entry)}`);
    }
    const fields = entry as Record<string, unknown>;
    const unknown = Object.keys(fields).filter((key) => !["name", "k", "labels"].includes(key));
    if (unknown.length > 0) throw new TypeError(`attributes[${index}] has unknown field(s) ${unknown.sort().join(", ")}`);
    const name = fields["name"];
    if (typeof name !== "string" || name.length === 0 || name.length > 64) {
      throw new TypeError(`attributes[${index}].name must be a non-empty string of at most 64 characters; got ${typeName(name)}`);
    }
    if (names.has(name)) throw new RangeError(`attribute names must be distinct; attributes[${index}].name repeats one`);
    names.add(name);
    const k = fields["k"] ?? (binary ? 2 : undefined);
    if (typeof k !== "number" || !Number.isSafeInteger(k) || k < 2 || k > MAX_K) {
      throw new RangeError(`attributes[${index}].k must be an integer in [2, ${MAX_K}]; got ${typeName(k)}`);
    }
    if (binary && k !== 2) {
      throw new RangeError(`attributes[${index}].k must be 2 (Fourier marginals are over binary attributes); got ${k}`);
    }
    const labels = fields["labels"] ?? null;
    if (labels === null) return { name, k, labels: null };
    if (!Array.isArray(labels) || labels.length !== k || !labels.every((l) => typeof l === "string") || new Set(labels).size !== k) {
      throw new RangeError(`attributes[${index}].labels must be ${k} distinct strings; got ${typeName(labels)}`);
    }
    return { name, k, labels: new Map((labels as string[]).map((label, i) => [label, i])) };
  });
}

/**
 * A record as its indices in the config's attribute order (Python: `Attributes.encode`): an
 * object attribute -> label (-> index without labels), or the indices themselves. Errors name
 * the position and the attribute and the value's type, never the value (they end up in logs).
 */
export function encodeRecord(attributes: readonly Attribute[], record: unknown, position: number): number[] {
  const at = `values[${position}]`;
  if (Array.isArray(record)) {
    if (record.length !== attributes.length) {
      throw new RangeError(`${at} must hold ${attributes.length} indices; got ${record.length}`);
    }
    return record.map((v: unknown, j) => {
      const a = attributes[j] as Attribute;
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || v >= a.k) {
        throw new RangeError(`${at}[${j}] (${a.name}, a ${typeName(v)}) must be an integer in [0, ${a.k})`);
      }
      return v;
    });
  }
  if (record === null || typeof record !== "object") {
    throw new TypeError(`${at} must be an object attribute -> value; got ${typeName(record)}`);
  }
  const fields = record as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((key) => !attributes.some((a) => a.name === key));
  if (unknown.length > 0) {
    // the keys are field names the app chose, not values; still, only their count is said
    throw new RangeError(`${at} has unknown attribute(s); the attributes are ${attributes.map((a) => a.name).join(", ")}`);
  }
  return attributes.map(({ name, k, labels }) => {
    if (!Object.hasOwn(fields, name)) throw new RangeError(`${at} misses attribute ${JSON.stringify(name)}`);
    const value = fields[name];
    const code = labels !== null ? (typeof value === "string" ? labels.get(value) : undefined) : value;
    if (typeof code !== "number" || !Number.isSafeInteger(code) || code < 0 || code >= k) {
      const what = labels !== null ? `one of its ${k} labels` : `an integer in [0, ${k})`;
      throw new RangeError(`${at}, attribute ${JSON.stringify(name)} (a ${typeName(value)}) must be ${what}`);
    }
    return code;
  });
}
