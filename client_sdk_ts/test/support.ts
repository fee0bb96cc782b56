/** Test helpers shared by the test files: a word source that replays given words. */
import type { WordSource } from "../src/words.js";

/** Replays the given words in order and fails loudly when a sampler asks for more. */
export class ListWordSource implements WordSource {
  #words: bigint[];

  constructor(words: readonly (bigint | number)[]) {
    this.#words = words.map((w) => BigInt(w));
  }

  words(count: number): BigUint64Array {
    if (count > this.#words.length) {
      throw new Error(`ListWordSource: asked for ${count} words, ${this.#words.length} left`);
    }
    return BigUint64Array.from(this.#words.splice(0, count));
  }

  /** How many words were not consumed. */
  get left(): number {
    return this.#words.length;
  }
}

/** A word whose little-endian bytes are `bytes` (at most 8, the rest zero). */
export function wordOfBytes(bytes: readonly number[]): bigint {
  return bytes.reduce((word, byte, i) => word | (BigInt(byte) << BigInt(8 * i)), 0n);
}

/** A word whose little-endian 16-bit lanes are `lanes`. */
export function wordOfLanes16(lanes: readonly number[]): bigint {
  return lanes.reduce((word, lane, i) => word | (BigInt(lane) << BigInt(16 * i)), 0n);
}

/** A word whose little-endian 32-bit lanes are `lanes`. */
export function wordOfLanes32(lanes: readonly number[]): bigint {
  return lanes.reduce((word, lane, i) => word | (BigInt(lane) << BigInt(32 * i)), 0n);
}
