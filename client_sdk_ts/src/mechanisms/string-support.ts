/**
 * What the string mechanisms (cms, hcms, pem, sfp) share: a value's UTF-8 bytes or the reserved
 * symbol, the memo labels and memo keys of memoized draws and the sketch hash (docs/protocol.md,
 * "Strings"; Python: client_sdk/mechanisms/strings.py, sketch.py). Config fields, value checks,
 * error type names and the word source of a perturb call are fields.ts's.
 */
import { toHex } from "../wire.js";
import type { KeyedSource } from "../memoization.js";
import { requireKeys } from "../memo-chain.js";
import { stringValues } from "./fields.js";
import { KeyedBlake2b } from "./keyed-blake2b.js";

/** The reserved symbol: the single byte 0xFF (no UTF-8 text holds it), sent in place of a
 * value the mechanism cannot carry (too long, outside the alphabet, not valid Unicode). */
export const RESERVED: Uint8Array = Uint8Array.of(0xff);


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

/** The ledger's key of each string's permanent response (Python: `MemoizedStrings.memo_keys`):
 * `keys.key(memo_label("", raw), 0)` of the bytes the mechanism randomizes (never the string). */
export function stringMemoKeys(
  values: readonly string[],
  keys: KeyedSource,
  name: string,
  encode: (value: string) => Uint8Array,
): string[] {
  const source = requireKeys(keys, name);
  return stringValues(values).map((value) => source.key(memoLabel("", encode(value)), 0));
}

/** ``seed`` as 8 bytes big-endian after a key prefix (the sketch's and the SFP tag's keys). */
export function seededKey(prefix: string, seed: number): Uint8Array {
  const head = ENCODER.encode(prefix);
  const out = new Uint8Array(head.length + 8);
  out.set(head);
  new DataView(out.buffer).setBigUint64(head.length, BigInt(seed), false);
  return out;
}

/**
 * Each value once, as the bytes it is randomized as (first-seen order), and each value's index
 * among them (Python's ``strings.distinct_strings``): a batch checks, encodes and hashes each
 * distinct string once, whatever its size.
 */
export function distinctStrings(
  values: readonly string[],
  encode: (value: string) => Uint8Array,
): { encoded: Uint8Array[]; inverse: Int32Array } {
  const slots = new Map<string, number>();
  const byBytes = new Map<Uint8Array, number>(); // by identity: every reserved value is RESERVED
  const encoded: Uint8Array[] = [];
  const inverse = new Int32Array(values.length);
  values.forEach((value, i) => {
    let slot = slots.get(value);
    if (slot === undefined) {
      const raw = encode(value);
      slot = byBytes.get(raw);
      if (slot === undefined) {
        slot = encoded.push(raw) - 1;
        byBytes.set(raw, slot);
      }
      slots.set(value, slot);
    }
    inverse[i] = slot;
  });
  return { encoded, inverse };
}

/** The sketch's hash family h_0..h_{hashes-1} into [0, m) at ``seed``: h_j(d) is the j-th
 * little-endian uint32 of BLAKE2b(d, 4·hashes bytes, key "ldp-telemetry/sketch/v1" || seed),
 * masked to [0, m) (Python: ``StringSketch.hash_table``). */
export class SketchHash {
  readonly #hash: KeyedBlake2b;
  readonly #hashes: number;
  readonly #mask: number;

  constructor(hashes: number, m: number, seed: number) {
    this.#hash = new KeyedBlake2b(seededKey("ldp-telemetry/sketch/v1", seed), 4 * hashes);
    this.#hashes = hashes;
    this.#mask = m - 1;
  }

  /** h_j(raws[i]) at ``hashes·i + j``. */
  table(raws: readonly Uint8Array[]): Uint32Array {
    const hashes = this.#hashes;
    const out = new Uint32Array(raws.length * hashes);
    raws.forEach((raw, i) => out.set(this.#hash.words(raw), hashes * i));
    for (let i = 0; i < out.length; i++) out[i] = out[i]! & this.#mask;
    return out;
  }

  /** h_j of each value given as an index into distinct ``raws``, j = ``rows[i]``. */
  buckets(raws: readonly Uint8Array[], inverse: Int32Array, rows: readonly number[]): Int32Array {
    const table = this.table(raws);
    return inverse.map((slot, i) => table[this.#hashes * slot + (rows[i] as number)] as number);
  }
}

/** The sketch's hash of a value in row ``row`` (one {@link SketchHash} entry). */
export function sketchBucket(raw: Uint8Array, row: number, hashes: number, m: number, seed: number): number {
  return new SketchHash(hashes, m, seed).table([raw])[row] as number;
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
