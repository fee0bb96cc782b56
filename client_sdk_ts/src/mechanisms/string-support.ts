/**
 * What the string mechanisms (cms, hcms, pem, sfp) share, with multi and pckv for the first part:
 * the word source of a perturb call, the type of a value for errors, the ``"longitudinal"``
 * field, a value's UTF-8 bytes or the reserved symbol, the memo labels of memoized draws and the
 * sketch hash (docs/protocol.md, "Strings"; Python: client_sdk/mechanisms/strings.py, sketch.py).
 */
import { blake2b } from "@noble/hashes/blake2b";
import { toHex } from "../wire.js";
import { CryptoWordSource, type WordSource } from "../words.js";
import { configEpsilon, configObject } from "./fields.js";
import type { MechanismConfig, PerturbOptions } from "./types.js";

/** The reserved symbol: the single byte 0xFF (no UTF-8 text holds it), sent in place of a
 * value the mechanism cannot carry (too long, outside the alphabet, not valid Unicode). */
export const RESERVED: Uint8Array = Uint8Array.of(0xff);

/** The report's word source: the caller's, else the platform CSPRNG. */
export function wordSource(options: PerturbOptions | undefined): WordSource {
  return options?.rng ?? new CryptoWordSource();
}

/** Refuses the device's keyed source where a mechanism has no memoized or per-device draw
 * (Python's plain perturb takes no ``permanent``): a caller passing one expects memoization. */
export function refuseKeys(options: PerturbOptions | undefined, name: string): void {
  if (options?.keys !== undefined) throw new TypeError(`${name} is not memoized; it takes no keys`);
}

/** The type of a value for an error message (never the value: it may be private). */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isFinite(value)) return `non-finite number`;
  return typeof value;
}

/** The ``"longitudinal"`` field's epsilon_permanent (at least epsilon), or undefined. */
export function configPermanent(config: MechanismConfig, epsilon: number): number | undefined {
  if (config.longitudinal === undefined) return undefined;
  const settings = configObject(config, "longitudinal");
  const unknown = Object.keys(settings).filter((key) => key !== "epsilon_permanent");
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
