/**
 * Wire encodings shared by the mechanisms (docs/protocol.md, "Bit rows"; Python:
 * `client_sdk.mechanisms._wire`): bit rows packed most significant bit first, sent as unpadded
 * URL-safe base64.
 */

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** Unpadded URL-safe base64 of `bytes` (Python: `base64.urlsafe_b64encode(...).rstrip(b"=")`). */
export function base64Url(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i]!;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    out += ALPHABET[a >> 2]!;
    out += ALPHABET[((a & 3) << 4) | ((b ?? 0) >> 4)]!;
    if (b !== undefined) out += ALPHABET[((b & 15) << 2) | ((c ?? 0) >> 6)]!;
    if (c !== undefined) out += ALPHABET[c & 63]!;
  }
  return out;
}

/** k bits (``length`` of ``bits`` from ``offset``; all of them by default) into ⌈k/8⌉ bytes: bit i
 * is bit 7 - (i mod 8) of byte ⌊i/8⌋, pad bits 0. */
export function packBits(bits: readonly boolean[], offset = 0, length = bits.length - offset): Uint8Array {
  const out = new Uint8Array(Math.ceil(length / 8));
  for (let i = 0; i < length; i++) if (bits[offset + i]) out[i >> 3]! |= 0x80 >> (i & 7);
  return out;
}

/** The k bits of a packed row (the inverse of {@link packBits}). */
export function unpackBits(packed: Uint8Array, k: number): boolean[] {
  return Array.from({ length: k }, (_, i) => ((packed[i >> 3]! >> (7 - (i & 7))) & 1) === 1);
}

/** The wire text of a row of bits. */
export function encodeBitRow(bits: readonly boolean[]): string {
  return base64Url(packBits(bits));
}

/** The wire text of a packed row of `k` bits, checking its length. */
export function encodePackedRow(packed: Uint8Array, k: number): string {
  if (!(packed instanceof Uint8Array) || packed.length !== Math.ceil(k / 8)) {
    throw new RangeError(`a report must be ${Math.ceil(k / 8)} packed bytes for k=${k}; got ${typeof packed}`);
  }
  return base64Url(packed);
}

/** Lowercase hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Bytes of a hex string (even length, 0-9a-f). */
export function fromHex(text: string, field = "hex"): Uint8Array {
  if (typeof text !== "string" || text.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(text)) {
    throw new TypeError(`${field} must be a string of hex digits; got ${typeof text}`);
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** The integer of [low, high) with the longest JSON text (Python: `_wire.widest_int`), a bound on a payload's size. */
export function widestInt(low: number, high: number): number {
  return String(low).length > String(high - 1).length ? low : high - 1;
}

/** The wire text of a `bits`-bit vector of zeros: every such vector has its length (Python: `bits_text`). */
export function bitsText(bits: number): string {
  return encodeBitRow(new Array<boolean>(bits).fill(false));
}
