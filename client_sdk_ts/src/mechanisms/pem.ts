/**
 * PEM, the prefix-extending method (Wang, Li & Jha, "Locally Differentially Private Heavy Hitter
 * Identification", TDSC 2019), with and without an alphabet, plain and memoized
 * (docs/protocol.md, "Strings" and "Memoized variants"; Python: client_sdk/mechanisms/pem.py).
 */
import type { WordSource } from "../words.js";
import { expRational, thresholdProbability } from "../rational.js";
import { uniformBelow } from "../samplers.js";
import type { KeyedSource } from "../memoization.js";
import { requireKeys } from "../memo-chain.js";
import { checkKeys, configEpsilon, configInt, configPermanent, stringValues, typeName, wordSource } from "./fields.js";
import { widestInt } from "../wire.js";
import { RESERVED, countReserved, isWellFormed, memoLabel, representable, stringMemoKeys } from "./string-support.js";
import { keepOrOther, keepThreshold, randomizedResponseChainThreshold } from "./categorical.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

/** The hash family's prime P = 2^31 - 1. */
const PRIME = 2 ** 31 - 1;
/** Bits of the prefix a seed coefficient multiplies. */
const CHUNK_BITS = 30;
const MAX_LENGTH = 32;
const MAX_ALPHABET = 256;
const LEVEL_LABEL = "pem:level";
const FIELDS = ["epsilon", "max_length", "start_bits", "step_bits", "g", "final_weight"];

/** A PEM report: the level, the seed (the level's coefficients, then b) and the bucket. */
export interface PemReport {
  readonly level: number;
  readonly seed: readonly number[];
  readonly y: number;
}

/** a·x mod P for a < 2^31 and x < 2^30, exactly in doubles (x split in 15-bit halves so that
 * every product stays below 2^47). */
function mulModPrime(a: number, x: number): number {
  return (((a * Math.floor(x / 32768)) % PRIME) * 32768 + a * (x % 32768)) % PRIME;
}

/** bitlen(x) of a non-negative integer. */
function bitLength(x: number): number {
  return x === 0 ? 0 : Math.floor(Math.log2(x)) + 1;
}

/** The alphabet's characters (code points), checked as Python's ``_check_alphabet``. */
function parseAlphabet(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || value.length === 0) {
    throw new TypeError(`alphabet must be a non-empty string of the distinct characters values use; got ${typeName(value)}`);
  }
  if (!isWellFormed(value)) throw new RangeError("alphabet must be valid Unicode (no lone surrogate)");
  const characters = [...value];
  if (new Set(characters).size !== characters.length) throw new RangeError("alphabet must not repeat a character");
  if (characters.length > MAX_ALPHABET) {
    throw new RangeError(`alphabet must have at most ${MAX_ALPHABET} characters; got ${characters.length}`);
  }
  return characters;
}

export class Pem implements Mechanism<string, PemReport> {
  readonly name = "pem";
  readonly valueKind = "string";
  readonly discovery = "prefixes";
  readonly epsilon: number;
  readonly maxLength: number;
  readonly alphabet?: readonly string[];
  readonly #allowed?: ReadonlySet<string>;
  readonly #index: ReadonlyMap<string, number>;
  readonly symbolBits: number;
  readonly lengthBits: number;
  readonly totalBits: number;
  readonly startBits: number;
  readonly stepBits: number;
  readonly g: number;
  readonly finalWeight: number;
  readonly levels: number;
  readonly keepThreshold: bigint;
  /** With ``"longitudinal"``: the permanent step's keep threshold and the instantaneous one's. */
  readonly memo?: { readonly permanentKeep: bigint; readonly again: bigint };
  /** The device's level comes from its keyed source (a simulation without keys draws a level
   * per report from the words). */
  readonly usesDeviceChoices = true;
  /** Under ``"longitudinal"``: each string's (seed, y) memoized. */
  readonly memoized: boolean;
  /** Memoized: epsilon_permanent, what all reports of one string reveal (its PRR). */
  readonly epsilonInf?: number;
  /** Memoized, the PRR's hash seed goes with every report of a string: a pseudonym. */
  readonly deterministicPseudonym: boolean;

  constructor(config: MechanismConfig) {
    checkKeys(config, "pem", FIELDS, ["alphabet", "longitudinal"]);
    this.epsilon = configEpsilon(config);
    if (this.epsilon > 30) throw new RangeError(`epsilon must be at most 30 for pem; got ${this.epsilon}`);
    this.maxLength = configInt(config, "max_length", 1, MAX_LENGTH);
    const alphabet = parseAlphabet(config.alphabet);
    if (alphabet !== undefined) {
      this.alphabet = alphabet;
      this.#allowed = new Set(alphabet);
    }
    this.#index = new Map((alphabet ?? []).map((c, i) => [c, i]));
    this.lengthBits = bitLength(this.maxLength);
    this.symbolBits = alphabet === undefined ? 8 : Math.max(1, bitLength(alphabet.length - 1));
    this.totalBits = this.lengthBits + this.symbolBits * this.maxLength;
    this.startBits = configInt(config, "start_bits", this.lengthBits, this.totalBits);
    this.stepBits = configInt(config, "step_bits", 1, 12);
    this.g = configInt(config, "g", 2, 1 << 16);
    this.finalWeight = configInt(config, "final_weight", 1, 1 << 16);
    this.levels = 1 + Math.ceil((this.totalBits - this.startBits) / this.stepBits);
    this.keepThreshold = keepThreshold(this.epsilon, this.g);
    const permanent = configPermanent(config, this.epsilon);
    if (permanent !== undefined) {
      const permanentKeep = keepThreshold(permanent, this.g);
      // the instantaneous step is L-GRR over the g buckets (Python's `MemoizedPEM._again_threshold`)
      const again = randomizedResponseChainThreshold(thresholdProbability(permanentKeep), this.g, expRational(this.epsilon));
      this.memo = { permanentKeep, again };
      this.epsilonInf = permanent;
    }
    this.memoized = this.deterministicPseudonym = this.memo !== undefined;
  }

  memoKeys(values: readonly string[], keys: KeyedSource): string[] {
    return stringMemoKeys(values, keys, this.name, (v) => this.encode(v));
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): { level: number; seed: number[]; y: number } {
    return {
      level: widestInt(0, this.levels),
      seed: new Array<number>(this.chunkCount(this.levels - 1) + 1).fill(PRIME - 1),
      y: widestInt(0, this.g),
    };
  }

  /** b_i: the prefix bits of level i. */
  levelBits(level: number): number {
    return Math.min(this.startBits + level * this.stepBits, this.totalBits);
  }

  chunkCount(level: number): number {
    return Math.ceil(this.levelBits(level) / CHUNK_BITS);
  }

  get seedWidth(): number {
    return this.chunkCount(this.levels - 1) + 1;
  }

  /** The bytes a value is randomized as: UTF-8, or the reserved symbol. */
  encode(value: string): Uint8Array {
    return representable(value, this.maxLength, this.#allowed);
  }

  /** How many of ``values`` are sent as the reserved symbol. */
  reservedCount(values: readonly string[]): number {
    return countReserved(stringValues(values), this.maxLength, this.#allowed);
  }

  /** The value's bit string: its length in symbols, then each symbol, padded with symbol 0;
   * the reserved symbol is length 0 with first symbol 1. */
  valueBits(value: string, raw: Uint8Array): number[] {
    const reserved = raw === RESERVED;
    let symbols: number[];
    if (reserved) symbols = [];
    else if (this.alphabet === undefined) symbols = Array.from(raw);
    else symbols = [...value].map((c) => this.#index.get(c) as number);
    const length = symbols.length;
    const padded = reserved ? [1] : symbols;
    const bits: number[] = [];
    for (let i = this.lengthBits - 1; i >= 0; i--) bits.push((length >> i) & 1);
    for (let s = 0; s < this.maxLength; s++) {
      const symbol = padded[s] ?? 0;
      for (let i = this.symbolBits - 1; i >= 0; i--) bits.push((symbol >> i) & 1);
    }
    return bits;
  }

  /** h = floor(g·r/P), r = (b + sum_t a_t·x_t) mod P over the level's chunks x_t. */
  bucket(seed: readonly number[], bits: readonly number[], level: number): number {
    const prefix = this.levelBits(level);
    let r = seed[seed.length - 1] as number;
    for (let t = 0; t < this.chunkCount(level); t++) {
      let chunk = 0;
      for (let i = CHUNK_BITS * t; i < Math.min(prefix, CHUNK_BITS * t + CHUNK_BITS); i++) {
        chunk = chunk * 2 + (bits[i] as number);
      }
      r = (r + mulModPrime(seed[t] as number, chunk)) % PRIME;
    }
    // r·g < 2^47 is exact; a quotient below 2^16 that is not an integer lies at least 1/P from
    // the next integer, far above the double's spacing there (2^-36): the floor is exact
    return Math.floor((r * this.g) / PRIME);
  }

  /** The level from uniform_below(L - 1 + final_weight), capped at L - 1. */
  drawLevels(rng: WordSource, n: number): number[] {
    return uniformBelow(rng, this.levels - 1 + this.finalWeight, n).map((u) => Math.min(Number(u), this.levels - 1));
  }

  /** The device's level, fixed by its keyed source. */
  levelOf(keys: KeyedSource): number {
    return this.drawLevels(keys.source(LEVEL_LABEL, 0), 1)[0] as number;
  }

  /** The level's coefficients (the others zeroed) from one uniform_below(P, width) row. */
  #seedRow(row: readonly number[], level: number): number[] {
    const count = this.chunkCount(level);
    return row.map((a, i) => (i < count || i === row.length - 1 ? a : 0));
  }

  /** One report per value: the device's level (``keys``) or a level per report from ``rng``
   * (a simulated population); memoized configs need ``keys``. */
  perturb(input: readonly string[], options?: PerturbOptions): PemReport[] {
    const values = stringValues(input);
    const rng = wordSource(options);
    const keys = options?.keys;
    if (this.memo !== undefined) {
      return this.#memoized(values, requireKeys(keys, this.name), rng, this.memo);
    }
    const n = values.length;
    const levels = keys !== undefined ? new Array<number>(n).fill(this.levelOf(keys)) : this.drawLevels(rng, n);
    const width = this.seedWidth;
    const flat = uniformBelow(rng, PRIME, n * width).map(Number);
    const seeds = levels.map((level, i) => this.#seedRow(flat.slice(i * width, (i + 1) * width), level));
    const bits = new Map<string, number[]>(); // each distinct string's, once (Python's distinct_strings)
    const hashed = levels.map((level, i) => {
      const value = values[i] as string;
      if (!bits.has(value)) bits.set(value, this.valueBits(value, this.encode(value)));
      return this.bucket(seeds[i] as number[], bits.get(value) as number[], level);
    });
    const ys = keepOrOther(rng, hashed, this.keepThreshold, this.g);
    return levels.map((level, i) => ({ level, seed: seeds[i] as number[], y: ys[i] as number }));
  }

  #memoized(
    values: readonly string[],
    keys: KeyedSource,
    rng: WordSource,
    memo: { permanentKeep: bigint; again: bigint },
  ): PemReport[] {
    const level = this.levelOf(keys);
    const permanent = values.map((value) => {
      const raw = this.encode(value);
      const stream = keys.source(memoLabel("pem:", raw), 0);
      const seed = this.#seedRow(uniformBelow(stream, PRIME, this.seedWidth).map(Number), level);
      const hashed = this.bucket(seed, this.valueBits(value, raw), level);
      return { seed, y: keepOrOther(stream, [hashed], memo.permanentKeep, this.g)[0] as number };
    });
    const ys = keepOrOther(
      rng,
      permanent.map((p) => p.y),
      memo.again,
      this.g,
    );
    return permanent.map((p, i) => ({ level, seed: p.seed, y: ys[i] as number }));
  }

  toWire(reports: readonly PemReport[]): { level: number; seed: number[]; y: number }[] {
    return reports.map((r) => {
      const count = this.chunkCount(r.level);
      return { level: r.level, seed: [...r.seed.slice(0, count), r.seed[r.seed.length - 1] as number], y: r.y };
    });
  }
}
