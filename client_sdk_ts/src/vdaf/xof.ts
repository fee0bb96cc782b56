/**
 * XofTurboShake128 of draft-irtf-cfrg-vdaf-20 (section "XofTurboShake128") on the TurboSHAKE128
 * of RFC 9861 (@noble/hashes), a port of the Python SDK's `client_sdk.vdaf.xof`.
 */
import { turboshake128 } from "@noble/hashes/sha3-addons";

import type { Field } from "./field.js";

/** The draft's version byte (draft-irtf-cfrg-vdaf-20, section "Conventions"). */
export const VDAF_VERSION = 18;

/** Concatenation of byte strings. */
export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** The domain separation tag: version, class, algorithm id, usage (big-endian). */
export function formatDst(algoClass: number, algo: number, usage: number): Uint8Array {
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  out[0] = VDAF_VERSION;
  out[1] = algoClass;
  view.setUint32(2, algo >>> 0, false);
  view.setUint16(6, usage, false);
  return out;
}

type TurboShake = ReturnType<typeof turboshake128.create>;

/**
 * TurboSHAKE128 with domain byte 1 over `len(dst) (2 bytes LE) || dst || len(seed) || seed ||
 * binder`; `next` squeezes the stream in order.
 */
export class XofTurboShake128 {
  static readonly SEED_SIZE = 32;
  readonly #h: TurboShake;

  constructor(seed: Uint8Array, dst: Uint8Array, binder: Uint8Array) {
    if (seed.length > 255) throw new RangeError(`XOF seed: ${seed.length} bytes, at most 255 allowed`);
    if (dst.length > 65535) throw new RangeError(`XOF dst: ${dst.length} bytes, at most 65535 allowed`);
    const head = new Uint8Array(2);
    new DataView(head.buffer).setUint16(0, dst.length, true);
    this.#h = turboshake128.create({ D: 1 });
    this.#h.update(head).update(dst).update(Uint8Array.of(seed.length)).update(seed).update(binder);
  }

  next(length: number): Uint8Array {
    return this.#h.xof(length);
  }

  /** `length` elements by rejection sampling (both fields' masks are all ones). */
  nextVec(field: Field, length: number): bigint[] {
    const size = field.encodedSize;
    const mod = field.modulus;
    const out: bigint[] = [];
    while (out.length < length) {
      const chunk = this.next((length - out.length) * size);
      const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      for (let i = 0; i < chunk.length; i += size) {
        const x = field.readElement(view, i);
        if (x < mod) out.push(x);
      }
    }
    return out;
  }

  static deriveSeed(seed: Uint8Array, dst: Uint8Array, binder: Uint8Array): Uint8Array {
    return new XofTurboShake128(seed, dst, binder).next(XofTurboShake128.SEED_SIZE);
  }

  static expandIntoVec(field: Field, seed: Uint8Array, dst: Uint8Array, binder: Uint8Array, length: number): bigint[] {
    return new XofTurboShake128(seed, dst, binder).nextVec(field, length);
  }
}
