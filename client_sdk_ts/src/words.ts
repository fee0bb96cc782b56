/**
 * Uniform 64-bit words, the only randomness a mechanism consumes (docs/protocol.md, "Random
 * words"). On a device the source is the platform CSPRNG (`crypto.getRandomValues`); memoized
 * draws and the conformance vectors use {@link HmacWordSource}, the same construction as the
 * Python SDK's `client_sdk.randomness.HmacWordSource`.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";

/** A stream of uniform 64-bit words, consumed in order across calls. */
export interface WordSource {
  /** The next `count` words of the stream. */
  words(count: number): BigUint64Array;
}

/** Little-endian 64-bit words of `bytes` (its length a multiple of 8). */
export function wordsFromBytes(bytes: Uint8Array): BigUint64Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new BigUint64Array(bytes.byteLength >>> 3);
  for (let i = 0; i < out.length; i++) out[i] = view.getBigUint64(i * 8, true);
  return out;
}

/**
 * Deterministic words: block i (from 0) is HMAC-SHA256(key, i as 8 bytes big-endian), read as
 * four little-endian words. The key holds at least 16 bytes.
 */
export class HmacWordSource implements WordSource {
  readonly #key: Uint8Array;
  #block = 0n;
  #buffer: bigint[] = [];

  constructor(key: Uint8Array) {
    if (!(key instanceof Uint8Array) || key.length < 16) {
      throw new TypeError("HmacWordSource needs a key of at least 16 bytes (a Uint8Array)");
    }
    this.#key = Uint8Array.from(key);
  }

  words(count: number): BigUint64Array {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new RangeError(`words: count must be a non-negative integer, got ${typeof count}`);
    }
    const counter = new Uint8Array(8);
    const counterView = new DataView(counter.buffer);
    while (this.#buffer.length < count) {
      counterView.setBigUint64(0, this.#block, false);
      this.#block += 1n;
      const block = wordsFromBytes(hmac(sha256, this.#key, counter));
      for (const word of block) this.#buffer.push(word);
    }
    return BigUint64Array.from(this.#buffer.splice(0, count));
  }

  toString(): string {
    return "HmacWordSource(<secret key>)";
  }
}

/** Largest request `crypto.getRandomValues` takes in one call (65,536 bytes). */
const MAX_RANDOM_BYTES = 65536;

/** The platform CSPRNG: 8 bytes of `crypto.getRandomValues` per word, little-endian. */
export class CryptoWordSource implements WordSource {
  readonly #crypto: Crypto;

  constructor() {
    const platform = (globalThis as { crypto?: Crypto }).crypto;
    if (platform === undefined || typeof platform.getRandomValues !== "function") {
      throw new Error(
        "ldp-telemetry needs crypto.getRandomValues (a secure context in browsers, Node 20 or later); " +
          "it refuses to randomize without a cryptographic random source",
      );
    }
    this.#crypto = platform;
  }

  words(count: number): BigUint64Array {
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new RangeError(`words: count must be a non-negative integer, got ${typeof count}`);
    }
    const bytes = new Uint8Array(count * 8);
    for (let offset = 0; offset < bytes.length; offset += MAX_RANDOM_BYTES) {
      this.#crypto.getRandomValues(bytes.subarray(offset, Math.min(offset + MAX_RANDOM_BYTES, bytes.length)));
    }
    return wordsFromBytes(bytes);
  }
}
