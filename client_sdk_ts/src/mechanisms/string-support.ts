/**
 * What the string mechanisms (cms, hcms, pem, sfp) share, with multi and pckv for the first part:
 * the word source and the device's keyed source of a perturb call, config fields, a value's UTF-8
 * bytes or the reserved symbol, the memo labels of memoized draws and the sketch hash
 * (docs/protocol.md, "Strings"; Python: client_sdk/mechanisms/strings.py, sketch.py).
 */
import { blake2b } from "@noble/hashes/blake2b";
import { uniformBelow } from "../samplers.js";
import { toHex } from "../wire.js";
import { CryptoWordSource, type WordSource } from "../words.js";
import type { KeyedSource } from "./pending-core.js";
import type { MechanismConfig, PerturbOptions } from "./types.js";

/** The reserved symbol: the single byte 0xFF (no UTF-8 text holds it), sent in place of a
 * value the mechanism cannot carry (too long, outside the alphabet, not valid Unicode). */
export const RESERVED: Uint8Array = Uint8Array.of(0xff);

/** A perturb call of a mechanism with per-device draws: ``keys`` is the device's keyed source. */
export interface KeyedPerturbOptions extends PerturbOptions {
  keys?: KeyedSource;
}

/** The report's word source: the caller's, else the platform CSPRNG. */
export function wordSource(options: PerturbOptions | undefined): WordSource {
  return options?.rng ?? new CryptoWordSource();
}

/** The device's keyed source a memoized mechanism needs, or an error saying so. */
export function requireKeys(options: KeyedPerturbOptions | undefined, name: string): KeyedSource {
  const keys = options?.keys;
  if (keys === undefined || keys === null || typeof keys.source !== "function") {
    throw new TypeError(`${name}: a memoized config needs options.keys (the device's keyed source), got ${typeName(keys)}`);
  }
  return keys;
}

/** ``uniform_below(high)`` from the keyed source of (label, 0): a per-device choice (no word
 * when high = 1). */
export function deviceChoice(keys: KeyedSource, label: string, high: number): number {
  return high > 1 ? Number(uniformBelow(keys.source(label, 0), high, 1)[0]) : 0;
}

/** The largest epsilon a mechanism is built with (Python's ``MAX_EPSILON``). */
const MAX_EPSILON = 40;

/** The type of a value for an error message (never the value: it may be private). */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isFinite(value)) return `non-finite number`;
  return typeof value;
}

/** The config's integer field in [minimum, maximum], or an error naming the field. */
export function configInt(
  config: MechanismConfig,
  field: string,
  minimum: number,
  maximum: number,
  fallback?: number,
): number {
  const value = config[field] ?? fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < minimum || value > maximum) {
    throw new RangeError(
      `${config.mechanism}: config.${field} must be an integer in [${minimum}, ${maximum}], got ` +
        (typeof value === "number" && Number.isSafeInteger(value) ? `${value}` : typeName(value)),
    );
  }
  return value;
}

/** A config number that is an epsilon: positive, finite, at most 40 (``check_epsilon``). */
export function configEpsilon(value: unknown, field: string, mechanism: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0 || value > MAX_EPSILON) {
    throw new RangeError(
      `${mechanism}: config.${field} must be a number in (0, ${MAX_EPSILON}], got ` +
        (typeof value === "number" ? `${value}` : typeName(value)),
    );
  }
  return value;
}

/** The ``"longitudinal"`` field's epsilon_permanent (at least epsilon), or undefined. */
export function configPermanent(config: MechanismConfig, epsilon: number): number | undefined {
  const longitudinal = config.longitudinal;
  if (longitudinal === undefined || longitudinal === null) return undefined;
  if (typeof longitudinal !== "object" || Array.isArray(longitudinal)) {
    throw new TypeError(`${config.mechanism}: config.longitudinal must be an object, got ${typeName(longitudinal)}`);
  }
  const permanent = configEpsilon(
    (longitudinal as Record<string, unknown>).epsilon_permanent,
    "longitudinal.epsilon_permanent",
    config.mechanism,
  );
  if (permanent < epsilon) {
    throw new RangeError(
      `${config.mechanism}: config.longitudinal.epsilon_permanent must be >= epsilon ` +
        `(one report can never reveal more than all reports), got ${permanent} < ${epsilon}`,
    );
  }
  return permanent;
}

/** Refuses fields a mechanism does not know (a typo must not silently change nothing). */
export function checkFields(config: MechanismConfig, known: readonly string[]): void {
  for (const field of Object.keys(config)) {
    if (field !== "mechanism" && !known.includes(field)) {
      throw new RangeError(`${config.mechanism}: config has an unknown field ${JSON.stringify(field)}`);
    }
  }
}

/** Whether a JS string is well-formed UTF-16 (no lone surrogate: Python could not encode it). */
export function isWellFormed(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) return false;
  }
  return true;
}

const ENCODER = new TextEncoder();

/**
 * The bytes a string mechanism randomizes for ``value``: its UTF-8 bytes when it can carry them
 * (at most ``maxLength`` bytes; with an alphabet, at most ``maxLength`` characters (code points,
 * as Python counts them) all in the alphabet), else {@link RESERVED}. A lone surrogate, which
 * Python cannot encode, is reserved too (TextEncoder would silently write U+FFFD).
 */
export function representable(value: string, maxLength: number, alphabet?: ReadonlySet<string>): Uint8Array {
  if (!isWellFormed(value)) return RESERVED;
  const raw = ENCODER.encode(value);
  if (alphabet === undefined) return raw.length <= maxLength ? raw : RESERVED;
  const characters = [...value];
  return characters.length <= maxLength && characters.every((c) => alphabet.has(c)) ? raw : RESERVED;
}

/** How many of ``values`` a mechanism sends as the reserved symbol (the device's status counts
 * them; the values are never kept). */
export function countReserved(values: readonly string[], maxLength: number, alphabet?: ReadonlySet<string>): number {
  return values.filter((value) => representable(value, maxLength, alphabet) === RESERVED).length;
}

/** Refuses anything but an array of strings, naming the position and the type. */
export function checkStrings(values: readonly unknown[], mechanism: string): asserts values is readonly string[] {
  if (!Array.isArray(values)) {
    throw new TypeError(`${mechanism}: values must be an array of strings, got ${typeName(values)}`);
  }
  values.forEach((value, index) => {
    if (typeof value !== "string") {
      throw new TypeError(`${mechanism}: values[${index}] must be a string, got ${typeName(value)}`);
    }
  });
}

/** The keyed-source label of a string's memoized draw: the namespace, ``string:``, its hex. */
export function memoLabel(namespace: string, raw: Uint8Array): string {
  return `${namespace}string:${toHex(raw)}`;
}

/** ``seed`` as 8 bytes big-endian after a key prefix (the sketch's and the SFP tag's keys). */
export function seededKey(prefix: string, seed: number): Uint8Array {
  const head = ENCODER.encode(prefix);
  const out = new Uint8Array(head.length + 8);
  out.set(head);
  new DataView(out.buffer).setBigUint64(head.length, BigInt(seed), false);
  return out;
}

/** The sketch's hash of a value in row ``row``: the row-th little-endian uint32 of
 * BLAKE2b(raw, 4·hashes bytes, key "ldp-telemetry/sketch/v1" || seed), masked to [0, m). */
export function sketchBucket(raw: Uint8Array, row: number, hashes: number, m: number, seed: number): number {
  const digest = blake2b(raw, { dkLen: 4 * hashes, key: seededKey("ldp-telemetry/sketch/v1", seed) });
  const view = new DataView(digest.buffer, digest.byteOffset, digest.byteLength);
  return view.getUint32(4 * row, true) & (m - 1);
}

/** The parity of the set bits of a non-negative integer below 2^32. */
export function parity(x: number): number {
  let v = x >>> 0;
  v ^= v >>> 16;
  v ^= v >>> 8;
  v ^= v >>> 4;
  v ^= v >>> 2;
  v ^= v >>> 1;
  return v & 1;
}
