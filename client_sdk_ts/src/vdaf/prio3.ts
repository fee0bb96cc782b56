/**
 * The Client's side of Prio3 (draft-irtf-cfrg-vdaf-20, section "Prio3"): the measurement is
 * encoded, proven and split into additive shares, one per Aggregator. A port of `shard` and
 * the share encodings of the Python SDK's `client_sdk.vdaf.prio3`; the Aggregators' side
 * (`verify_init` onwards) stays in Python.
 *
 * Input shares are `{measShare, proofsShare, blind}` for the Leader (aggregator 0) and
 * `{seed, blind}` for each Helper, as in the draft.
 */
import { type Field, Field64, Field128 } from "./field.js";
import { Count, Flp, Histogram, MultihotCountVec, Sum, SumVec, type Valid } from "./flp.js";
import { XofTurboShake128, concatBytes, formatDst } from "./xof.js";

const USAGE_MEAS_SHARE = 1;
const USAGE_PROOF_SHARE = 2;
const USAGE_JOINT_RANDOMNESS = 3;
const USAGE_PROVE_RANDOMNESS = 4;
const USAGE_QUERY_RANDOMNESS = 5;
const USAGE_JOINT_RAND_SEED = 6;
const USAGE_JOINT_RAND_PART = 7;

/** The joint randomness parts, one per Aggregator (null for the variants without). */
export type PublicShare = Uint8Array[] | null;
export interface LeaderShare {
  readonly measShare: bigint[];
  readonly proofsShare: bigint[];
  readonly blind: Uint8Array | null;
}
export interface HelperShare {
  readonly seed: Uint8Array;
  readonly blind: Uint8Array | null;
}
export type InputShare = LeaderShare | HelperShare;

function checkBytes(name: string, value: unknown, size: number): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array) || value.length !== size) {
    const got = value instanceof Uint8Array ? `${value.length} bytes` : typeof value;
    throw new TypeError(`${name} must be a Uint8Array of ${size} bytes; got ${got}`);
  }
}

/** The generic Prio3 on one FLP; the variants below fix the circuit, field and ID. */
export class Prio3<M> {
  static readonly NONCE_SIZE = 16;
  static readonly VERIFY_KEY_SIZE = XofTurboShake128.SEED_SIZE;
  readonly ROUNDS = 1;
  readonly NONCE_SIZE = Prio3.NONCE_SIZE;
  readonly RAND_SIZE: number;
  readonly flp: Flp<M>;
  readonly field: Field;

  constructor(
    readonly SHARES: number,
    readonly valid: Valid<M>,
    readonly ID: number,
    readonly PROOFS = 1,
  ) {
    if (!Number.isInteger(SHARES) || SHARES < 2 || SHARES > 255) throw new RangeError(`shares must be an integer in [2, 256); got ${typeof SHARES}`);
    if (!Number.isInteger(PROOFS) || PROOFS < 1 || PROOFS > 255) throw new RangeError(`num_proofs must be an integer in [1, 256); got ${typeof PROOFS}`);
    this.flp = new Flp(valid);
    this.field = valid.field;
    this.RAND_SIZE = XofTurboShake128.SEED_SIZE * SHARES * (valid.jointRandLen > 0 ? 2 : 1);
  }

  // -- auxiliary functions (draft section "Auxiliary Functions") ------------------------------

  #dst(usage: number, ctx: Uint8Array): Uint8Array {
    return concatBytes(formatDst(0, this.ID, usage), ctx);
  }

  #helperMeasShare(ctx: Uint8Array, aggId: number, share: Uint8Array): bigint[] {
    return XofTurboShake128.expandIntoVec(this.field, share, this.#dst(USAGE_MEAS_SHARE, ctx), Uint8Array.of(aggId), this.valid.measLen);
  }

  #helperProofsShare(ctx: Uint8Array, aggId: number, share: Uint8Array): bigint[] {
    const binder = Uint8Array.of(this.PROOFS, aggId);
    return XofTurboShake128.expandIntoVec(this.field, share, this.#dst(USAGE_PROOF_SHARE, ctx), binder, this.flp.proofLen * this.PROOFS);
  }

  #jointRandPart(ctx: Uint8Array, aggId: number, blind: Uint8Array, measShare: readonly bigint[], nonce: Uint8Array): Uint8Array {
    const binder = concatBytes(Uint8Array.of(aggId), nonce, this.field.encodeVec(measShare));
    return XofTurboShake128.deriveSeed(blind, this.#dst(USAGE_JOINT_RAND_PART, ctx), binder);
  }

  #jointRandSeed(ctx: Uint8Array, parts: readonly Uint8Array[]): Uint8Array {
    return XofTurboShake128.deriveSeed(new Uint8Array(XofTurboShake128.SEED_SIZE), this.#dst(USAGE_JOINT_RAND_SEED, ctx), concatBytes(...parts));
  }

  #jointRands(ctx: Uint8Array, parts: readonly Uint8Array[]): bigint[] {
    const seed = this.#jointRandSeed(ctx, parts);
    const length = this.valid.jointRandLen * this.PROOFS;
    return XofTurboShake128.expandIntoVec(this.field, seed, this.#dst(USAGE_JOINT_RANDOMNESS, ctx), Uint8Array.of(this.PROOFS), length);
  }

  #proveAll(ctx: Uint8Array, meas: readonly bigint[], proveSeed: Uint8Array, jointRands: readonly bigint[]): bigint[] {
    const pr = this.flp.proveRandLen;
    const jr = this.valid.jointRandLen;
    const proveRands = XofTurboShake128.expandIntoVec(
      this.field,
      proveSeed,
      this.#dst(USAGE_PROVE_RANDOMNESS, ctx),
      Uint8Array.of(this.PROOFS),
      pr * this.PROOFS,
    );
    const proofs: bigint[] = [];
    for (let i = 0; i < this.PROOFS; i++) {
      proofs.push(...this.flp.prove(meas, proveRands.slice(i * pr, (i + 1) * pr), jointRands.slice(i * jr, (i + 1) * jr)));
    }
    return proofs;
  }

  // -- sharding -------------------------------------------------------------------------------

  /**
   * Split `measurement` into `SHARES` input shares with proof shares; `rand` is `RAND_SIZE`
   * bytes from a CSPRNG (`crypto.getRandomValues` on a device), `nonce` `NONCE_SIZE` bytes.
   */
  shard(ctx: Uint8Array, measurement: M, nonce: Uint8Array, rand: Uint8Array): [PublicShare, InputShare[]] {
    if (!(ctx instanceof Uint8Array)) throw new TypeError(`ctx must be a Uint8Array; got ${typeof ctx}`);
    checkBytes("nonce", nonce, this.NONCE_SIZE);
    checkBytes("rand", rand, this.RAND_SIZE);
    const size = XofTurboShake128.SEED_SIZE;
    const seeds: Uint8Array[] = [];
    for (let i = 0; i < this.RAND_SIZE; i += size) seeds.push(rand.slice(i, i + size));
    const meas = this.valid.encode(measurement);
    return this.valid.jointRandLen > 0 ? this.#shardWithJointRand(ctx, meas, nonce, seeds) : this.#shardWithoutJointRand(ctx, meas, seeds);
  }

  #shardWithoutJointRand(ctx: Uint8Array, meas: bigint[], seeds: Uint8Array[]): [PublicShare, InputShare[]] {
    const helperShares = seeds.slice(0, this.SHARES - 1);
    let measShare = meas;
    let proofsShare = this.#proveAll(ctx, meas, seeds[this.SHARES - 1] as Uint8Array, []);
    helperShares.forEach((share, j) => {
      measShare = this.field.vecSub(measShare, this.#helperMeasShare(ctx, j + 1, share));
      proofsShare = this.field.vecSub(proofsShare, this.#helperProofsShare(ctx, j + 1, share));
    });
    return [null, [{ measShare, proofsShare, blind: null }, ...helperShares.map((seed) => ({ seed, blind: null }))]];
  }

  #shardWithJointRand(ctx: Uint8Array, meas: bigint[], nonce: Uint8Array, seeds: Uint8Array[]): [PublicShare, InputShare[]] {
    const helpers = this.SHARES - 1;
    const helperShares = seeds.filter((_, i) => i < 2 * helpers && i % 2 === 0);
    const helperBlinds = seeds.filter((_, i) => i < 2 * helpers && i % 2 === 1);
    const leaderBlind = seeds[2 * helpers] as Uint8Array;
    const proveSeed = seeds[2 * helpers + 1] as Uint8Array;
    let measShare = meas;
    const parts: Uint8Array[] = [];
    for (let j = 0; j < helpers; j++) {
      const helperMeas = this.#helperMeasShare(ctx, j + 1, helperShares[j] as Uint8Array);
      measShare = this.field.vecSub(measShare, helperMeas);
      parts.push(this.#jointRandPart(ctx, j + 1, helperBlinds[j] as Uint8Array, helperMeas, nonce));
    }
    parts.unshift(this.#jointRandPart(ctx, 0, leaderBlind, measShare, nonce));
    let proofsShare = this.#proveAll(ctx, meas, proveSeed, this.#jointRands(ctx, parts));
    for (let j = 0; j < helpers; j++) {
      proofsShare = this.field.vecSub(proofsShare, this.#helperProofsShare(ctx, j + 1, helperShares[j] as Uint8Array));
    }
    const shares: InputShare[] = [{ measShare, proofsShare, blind: leaderBlind }];
    for (let j = 0; j < helpers; j++) shares.push({ seed: helperShares[j] as Uint8Array, blind: helperBlinds[j] as Uint8Array });
    return [parts, shares];
  }

  // -- verification (the Aggregators' first step, for checking a Client's shares) -------------

  /**
   * This Aggregator's verifier share (the draft's `verify_init` without the output share):
   * `[verifiers, jointRandPart]`, and the joint randomness seed it derived (`corrected`).
   */
  verifyInit(
    verifyKey: Uint8Array,
    ctx: Uint8Array,
    aggId: number,
    nonce: Uint8Array,
    publicShare: PublicShare,
    inputShare: InputShare,
  ): { verifierShare: [bigint[], Uint8Array | null]; correctedSeed: Uint8Array | null } {
    checkBytes("verify_key", verifyKey, Prio3.VERIFY_KEY_SIZE);
    checkBytes("nonce", nonce, this.NONCE_SIZE);
    if (!Number.isInteger(aggId) || aggId < 0 || aggId >= this.SHARES) throw new RangeError(`agg_id must be in [0, ${this.SHARES})`);
    let measShare: bigint[];
    let proofsShare: bigint[];
    if ("measShare" in inputShare) {
      if (aggId !== 0) throw new TypeError("a helper's input share must be {seed, blind}");
      ({ measShare, proofsShare } = inputShare);
    } else {
      if (aggId === 0) throw new TypeError("the leader's input share must be {measShare, proofsShare, blind}");
      measShare = this.#helperMeasShare(ctx, aggId, inputShare.seed);
      proofsShare = this.#helperProofsShare(ctx, aggId, inputShare.seed);
    }
    const jr = this.valid.jointRandLen;
    let jointRands: bigint[] = [];
    let part: Uint8Array | null = null;
    let correctedSeed: Uint8Array | null = null;
    if (jr > 0) {
      if (inputShare.blind === null || publicShare === null || publicShare.length !== this.SHARES) {
        throw new TypeError(`this variant needs a blind and a public share of ${this.SHARES} parts`);
      }
      part = this.#jointRandPart(ctx, aggId, inputShare.blind, measShare, nonce);
      const parts = publicShare.slice();
      parts[aggId] = part;
      correctedSeed = this.#jointRandSeed(ctx, parts);
      jointRands = this.#jointRands(ctx, parts);
    }
    const ql = this.flp.queryRandLen;
    const pl = this.flp.proofLen;
    const binder = concatBytes(Uint8Array.of(this.PROOFS), nonce);
    const queryRands = XofTurboShake128.expandIntoVec(this.field, verifyKey, this.#dst(USAGE_QUERY_RANDOMNESS, ctx), binder, ql * this.PROOFS);
    const verifiers: bigint[] = [];
    for (let i = 0; i < this.PROOFS; i++) {
      verifiers.push(
        ...this.flp.query(measShare, proofsShare.slice(i * pl, (i + 1) * pl), queryRands.slice(i * ql, (i + 1) * ql), jointRands.slice(i * jr, (i + 1) * jr), this.SHARES),
      );
    }
    return { verifierShare: [verifiers, part], correctedSeed };
  }

  /** Sum the verifier shares and decide every proof: whether the Aggregators would accept. */
  decideVerifierShares(verifierShares: readonly [bigint[], Uint8Array | null][]): boolean {
    const vl = this.flp.verifierLen;
    let total = new Array<bigint>(vl * this.PROOFS).fill(0n);
    for (const [share] of verifierShares) total = this.field.vecAdd(total, share);
    for (let i = 0; i < this.PROOFS; i++) if (!this.flp.decide(total.slice(i * vl, (i + 1) * vl))) return false;
    return true;
  }

  encodeVerifierShare([verifiers, part]: [bigint[], Uint8Array | null]): Uint8Array {
    return concatBytes(this.field.encodeVec(verifiers), part ?? new Uint8Array(0));
  }

  // -- messages (draft section "Message Serialization") ----------------------------------------

  encodePublicShare(publicShare: PublicShare): Uint8Array {
    return publicShare === null ? new Uint8Array(0) : concatBytes(...publicShare);
  }

  encodeInputShare(inputShare: InputShare): Uint8Array {
    const blind = inputShare.blind ?? new Uint8Array(0);
    if ("measShare" in inputShare) {
      return concatBytes(this.field.encodeVec(inputShare.measShare), this.field.encodeVec(inputShare.proofsShare), blind);
    }
    return concatBytes(inputShare.seed, blind);
  }
}

/** Counts of 0/1 measurements over Field64 (ID 1). */
export class Prio3Count extends Prio3<number | bigint | boolean> {
  constructor(shares: number) {
    super(shares, new Count(Field64), 0x00000001);
  }
}

/** Sums of integers in `[0, maxMeasurement]` over Field64 (ID 2). */
export class Prio3Sum extends Prio3<number | bigint> {
  constructor(shares: number, maxMeasurement: number | bigint) {
    super(shares, new Sum(Field64, maxMeasurement), 0x00000002);
  }
}

/** Element-wise sums of `length` integers in `[0, maxMeasurement]` over Field128 (ID 3). */
export class Prio3SumVec extends Prio3<readonly (number | bigint)[]> {
  constructor(shares: number, length: number, maxMeasurement: number | bigint, chunkLength: number) {
    super(shares, new SumVec(Field128, length, maxMeasurement, chunkLength), 0x00000003);
  }
}

/** Histograms of a bucket index in `[0, length)` over Field128 (ID 4). */
export class Prio3Histogram extends Prio3<number | bigint> {
  constructor(shares: number, length: number, chunkLength: number) {
    super(shares, new Histogram(Field128, length, chunkLength), 0x00000004);
  }
}

/** Counts of boolean vectors with at most `maxWeight` set over Field128 (ID 5). */
export class Prio3MultihotCountVec extends Prio3<readonly boolean[]> {
  constructor(shares: number, length: number, maxWeight: number | bigint, chunkLength: number) {
    super(shares, new MultihotCountVec(Field128, length, maxWeight, chunkLength), 0x00000005);
  }
}
