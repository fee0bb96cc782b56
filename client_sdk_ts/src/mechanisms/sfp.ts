/**
 * SFP, Apple's sequence fragment puzzle (Apple Differential Privacy Team, "Learning with Privacy
 * at Scale", 2017): a one-bit HCMS report of the whole word, an offset in the clear and a Hadamard
 * response of the (tag, byte) fragment at that offset; plain and memoized (docs/protocol.md,
 * "Strings" and "Memoized variants"; Python: client_sdk/mechanisms/sfp.py).
 */
import type { KeyedSource } from "../memoization.js";
import { type BatchChain, VALUE_LABEL, deviceChoice, mixtureChain, requireKeys } from "../memo-chain.js";
import { expRational } from "../rational.js";
import { uniformBelow32 } from "../samplers.js";
import type { WordSource } from "../words.js";
import { HadamardResponse } from "./categorical.js";
import { checkKeys, configEpsilon, configInt, configNumber, configPermanent, refuseKeys, stringValues, wordSource } from "./fields.js";
import { Hcms } from "./sketch.js";
import { KeyedBlake2b } from "./keyed-blake2b.js";
import { countReserved, distinctStrings, representable, seededKey, stringMemoKeys } from "./string-support.js";
import { widestInt } from "../wire.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

/** Fragments: 256 tags times 256 bytes. */
const FRAGMENTS = 256 * 256;
const MAX_LENGTH = 32;
const FIELDS = ["epsilon", "max_length", "m", "hashes", "fragment_share", "fragment_blocks", "seed"];

/** An SFP report: the word's HCMS report, the offset and the fragment's HR report. */
export interface SfpReport {
  readonly word: number;
  readonly offset: number;
  readonly fragment: number;
}

export class Sfp implements Mechanism<string, SfpReport> {
  readonly name = "sfp";
  readonly valueKind = "string";
  readonly discovery = "fragments";
  readonly epsilon: number;
  /** The epsilon one report spends (plain configs; Python: `privacy_epsilon`). */
  readonly privacyEpsilon?: number;
  /** Memoized: what all reports of one string reveal, its two PRRs (Python: `epsilon_inf`). */
  readonly epsilonInf?: number;
  readonly maxLength: number;
  readonly seed: number;
  readonly share: number;
  /** The word's HCMS at epsilon_word = epsilon - share·epsilon (memoized under "longitudinal"). */
  readonly word: Hcms;
  /** HR over the fragments: at share·epsilon (plain) or share·epsilon_permanent (memoized). */
  readonly fragment: HadamardResponse;
  /** Memoized: the fragment's instantaneous step (the mixture chain at epsilon_fragment). */
  readonly chain?: BatchChain<number>;
  /** Under ``"longitudinal"``: the offset is the device's, the word's sign and the fragment's
   * response memoized per string. */
  readonly memoized: boolean;
  /** The fragment's tag hash: one-byte BLAKE2b keyed "ldp-telemetry/sfp-tag/v1" || seed. */
  readonly #tag: KeyedBlake2b;

  constructor(config: MechanismConfig) {
    checkKeys(config, "sfp", FIELDS, ["longitudinal"]);
    this.epsilon = configEpsilon(config);
    this.maxLength = configInt(config, "max_length", 1, MAX_LENGTH);
    this.seed = configInt(config, "seed", 0, 2 ** 53 - 1);
    this.#tag = new KeyedBlake2b(seededKey("ldp-telemetry/sfp-tag/v1", this.seed), 1);
    const share = configNumber(config, "fragment_share");
    if (!(share > 0 && share < 1)) throw new RangeError(`fragment_share must be a number in (0, 1); got ${share}`);
    this.share = share;
    const blocks = configInt(config, "fragment_blocks", 1, FRAGMENTS);
    const blockSize = 2 ** Math.ceil(FRAGMENTS / blocks).toString(2).length;
    if (Math.ceil(FRAGMENTS / (blockSize - 1)) !== blocks) {
      // HR's blocks are ceil(k/(b - 1)) for a power of two b (one per block size)
      throw new RangeError(`fragment_blocks must be ceil(65536/(b - 1)) for a power of two b; got ${blocks}`);
    }
    const m = configInt(config, "m", 2, 65536);
    if ((m & (m - 1)) !== 0) throw new RangeError(`m must be a power of two; got ${m}`);
    const hashes = configInt(config, "hashes", 1, 16);
    const epsilonFragment = share * this.epsilon;
    const shape = { epsilon: this.epsilon - epsilonFragment, m, hashes, maxLength: this.maxLength, seed: this.seed };
    const permanent = configPermanent(config, this.epsilon);
    if (permanent === undefined) {
      this.word = new Hcms(config, { shape, permanent: undefined });
      this.fragment = new HadamardResponse(epsilonFragment, FRAGMENTS, blocks);
    } else {
      this.word = new Hcms(config, { shape, permanent: permanent - share * permanent });
      this.fragment = new HadamardResponse(share * permanent, FRAGMENTS, blocks);
      this.chain = mixtureChain(this.fragment, FRAGMENTS, this.fragment.columnProfile(), expRational(epsilonFragment));
      // the plain SFP's privacy_epsilon at epsilon_permanent (the PRRs' guarantee)
      this.epsilonInf = permanent - share * permanent + share * permanent;
    }
    this.memoized = this.chain !== undefined;
    // Python's `privacy_epsilon`: the word's part plus the fragment's, which in floats can
    // exceed `epsilon` by an ulp (and then fails a policy whose max_epsilon is `epsilon`)
    if (permanent === undefined) this.privacyEpsilon = this.epsilon - epsilonFragment + epsilonFragment;
  }

  memoKeys(values: readonly string[], keys: KeyedSource): string[] {
    return stringMemoKeys(values, keys, this.name, (v) => representable(v, this.maxLength));
  }

  /** The widest payload (Python: `largest_wire_payload`). */
  largestWirePayload(): { offset: number; word: number; fragment: number } {
    return {
      offset: widestInt(0, this.maxLength),
      word: this.word.largestWirePayload(),
      fragment: this.fragment.largestWirePayload(),
    };
  }

  /** 256·tag + the byte at ``offset`` of raw padded with zeros, tag = the one-byte keyed
   * BLAKE2b of raw. */
  fragmentOf(raw: Uint8Array, offset: number): number {
    return 256 * (this.#tag.digest(raw)[0] as number) + (raw[offset] ?? 0);
  }

  /** How many of ``values`` are sent as the reserved symbol. */
  reservedCount(values: readonly string[]): number {
    return countReserved(stringValues(values), this.maxLength);
  }

  perturb(values: readonly string[], options?: PerturbOptions): SfpReport[] {
    const { encoded, inverse } = distinctStrings(stringValues(values), (v) => representable(v, this.maxLength));
    const rng = wordSource(options);
    if (this.chain !== undefined) {
      return this.#memoized(encoded, inverse, requireKeys(options?.keys, this.name), rng, this.chain);
    }
    refuseKeys(options, this.name);
    const n = inverse.length;
    const { hashes } = this.word.shape;
    const rows = hashes > 1 ? uniformBelow32(rng, hashes, n) : new Array<number>(n).fill(0);
    const words = this.word.perturbBuckets(this.word.hash.buckets(encoded, inverse, rows), rows, rng);
    const offsets = this.maxLength > 1 ? uniformBelow32(rng, this.maxLength, n) : new Array<number>(n).fill(0);
    const tags = encoded.map((raw) => 256 * (this.#tag.digest(raw)[0] as number));
    const fragments = this.fragment.perturb(
      offsets.map((offset, i) => {
        const slot = inverse[i] as number;
        return (tags[slot] as number) + ((encoded[slot] as Uint8Array)[offset] ?? 0);
      }),
      { rng },
    );
    return offsets.map((offset, i) => ({ word: words[i] as number, offset, fragment: fragments[i] as number }));
  }

  /** The device's offset; the word's memoized HCMS under ``sfp/word/``; the fragment's PRR from
   * ``keys.source("value", fragment)``; then from rng the word's flip-again and the mixture chain. */
  #memoized(
    encoded: readonly Uint8Array[],
    inverse: Int32Array,
    keys: KeyedSource,
    rng: WordSource,
    chain: BatchChain<number>,
  ): SfpReport[] {
    const offset = deviceChoice(keys, "sfp:offset", this.maxLength);
    const permanentWords = this.word.permanentReports(encoded, inverse, keys, "sfp/word/");
    const distinct = encoded.map((raw) => {
      const fragment = this.fragmentOf(raw, offset);
      return this.fragment.perturb([fragment], { rng: keys.source(VALUE_LABEL, fragment) })[0] as number;
    });
    const words = this.word.flipAgain(permanentWords, rng);
    const fragments = chain.instantaneous(
      Array.from(inverse, (slot) => distinct[slot] as number),
      rng,
    );
    return words.map((word, i) => ({ word, offset, fragment: fragments[i] as number }));
  }

  toWire(reports: readonly SfpReport[]): { fragment: number; offset: number; word: number }[] {
    return reports.map((r) => ({ fragment: r.fragment, offset: r.offset, word: r.word }));
  }
}
