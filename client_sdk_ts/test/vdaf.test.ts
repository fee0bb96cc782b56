/**
 * Prio3 sharding against the draft's published test vectors (draft-irtf-cfrg-vdaf-20,
 * vendored in tests/client_sdk/vdaf/vectors/): every report's public share and input shares
 * byte for byte, the verifier shares the Aggregators compute from them, and the XofTurboShake128
 * vector.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { fromHex, toHex } from "../src/wire.js";
import { Field64, Field128 } from "../src/vdaf/field.js";
import { SumVec } from "../src/vdaf/flp.js";
import {
  Prio3,
  Prio3Count,
  Prio3Histogram,
  Prio3MultihotCountVec,
  Prio3Sum,
  Prio3SumVec,
} from "../src/vdaf/prio3.js";
import { XofTurboShake128 } from "../src/vdaf/xof.js";

// dist/test/ -> the repository's tests/client_sdk/vdaf/vectors/
const VECTORS = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "tests", "client_sdk", "vdaf", "vectors");

interface VectorReport {
  measurement: unknown;
  nonce: string;
  rand: string;
  public_share: string;
  input_shares: string[];
  verifier_shares: string[][];
}
interface VectorFile {
  shares: number;
  ctx: string;
  verify_key: string;
  length?: number;
  chunk_length?: number;
  max_measurement?: number;
  max_weight?: number;
  operations: { operation: string; report_index?: number; success?: boolean }[];
  reports: VectorReport[];
}

function load<T>(name: string): T {
  return JSON.parse(readFileSync(join(VECTORS, name), "utf-8")) as T;
}

/** The VDAF of a vector file, as the draft's test harness builds it. */
function vdafOf(kind: string, v: VectorFile): Prio3<never> {
  const n = (x: number | undefined): number => {
    assert.ok(x !== undefined, `${kind}: missing parameter`);
    return x;
  };
  switch (kind) {
    case "Prio3Count":
      return new Prio3Count(v.shares) as Prio3<never>;
    case "Prio3Sum":
      return new Prio3Sum(v.shares, n(v.max_measurement)) as Prio3<never>;
    case "Prio3SumVec":
      return new Prio3SumVec(v.shares, n(v.length), n(v.max_measurement), n(v.chunk_length)) as Prio3<never>;
    case "Prio3Histogram":
      return new Prio3Histogram(v.shares, n(v.length), n(v.chunk_length)) as Prio3<never>;
    case "Prio3MultihotCountVec":
      return new Prio3MultihotCountVec(v.shares, n(v.length), n(v.max_weight), n(v.chunk_length)) as Prio3<never>;
    case "Prio3SumVecWithMultiproof": // the draft's test-only variant: Field64, three proofs
      return new Prio3(v.shares, new SumVec(Field64, n(v.length), n(v.max_measurement), n(v.chunk_length)), 0xffffffff, 3) as Prio3<never>;
    default:
      throw new Error(`no VDAF for ${kind}`);
  }
}

const SHARD_FILES = readdirSync(VECTORS).filter((name) => /^Prio3(Count|Sum|SumVec|Histogram|MultihotCountVec|SumVecWithMultiproof)_\d+\.json$/.test(name));

test("the vendored vector files are all found (five variants and the multiproof one)", () => {
  assert.equal(SHARD_FILES.length, 16, SHARD_FILES.join(", "));
});

for (const name of SHARD_FILES) {
  test(`shard reproduces ${name} byte for byte, and verifyInit its verifier shares`, () => {
    const v = load<VectorFile>(name);
    const vdaf = vdafOf(name.replace(/_\d+\.json$/, ""), v);
    const ctx = fromHex(v.ctx);
    const sharded = v.operations.filter((op) => op.operation === "shard");
    assert.equal(sharded.length, v.reports.length);
    for (const report of v.reports) {
      const [publicShare, inputShares] = vdaf.shard(ctx, report.measurement as never, fromHex(report.nonce), fromHex(report.rand));
      assert.equal(toHex(vdaf.encodePublicShare(publicShare)), report.public_share, "public share");
      assert.deepEqual(
        inputShares.map((share) => toHex(vdaf.encodeInputShare(share))),
        report.input_shares,
        "input shares",
      );
      const verifierShares = inputShares.map(
        (share, aggId) => vdaf.verifyInit(fromHex(v.verify_key), ctx, aggId, fromHex(report.nonce), publicShare, share).verifierShare,
      );
      assert.deepEqual(
        [verifierShares.map((share) => toHex(vdaf.encodeVerifierShare(share)))], // one round
        report.verifier_shares,
        "verifier shares",
      );
      assert.ok(vdaf.decideVerifierShares(verifierShares), "the Aggregators accept");
    }
  });
}

test("a tampered leader measurement share is rejected by the combined verifier", () => {
  for (const [vdaf, measurement] of [
    [new Prio3Count(2), 1],
    [new Prio3Histogram(2, 10, 3), 4],
    [new Prio3Sum(2, 100), 99],
  ] as [Prio3<never>, never][]) {
    const ctx = new TextEncoder().encode("tamper");
    const nonce = new Uint8Array(16).fill(7);
    const [publicShare, shares] = vdaf.shard(ctx, measurement, nonce, new Uint8Array(vdaf.RAND_SIZE).fill(3));
    const key = new Uint8Array(32).fill(1);
    const verify = (leader: (typeof shares)[number]): boolean =>
      vdaf.decideVerifierShares([leader, shares[1] as (typeof shares)[number]].map((share, aggId) => vdaf.verifyInit(key, ctx, aggId, nonce, publicShare, share).verifierShare));
    const leader = shares[0] as { measShare: bigint[]; proofsShare: bigint[]; blind: Uint8Array | null };
    assert.ok(verify(leader), "the honest shares are accepted");
    const bumped = leader.measShare.map((x, i) => (i === 0 ? (x + 1n) % vdaf.field.modulus : x));
    assert.equal(verify({ ...leader, measShare: bumped }), false, `${vdaf.constructor.name}: a bumped share is rejected`);
  }
});

test("XofTurboShake128 reproduces the draft's vector (derived seed and a Field128 vector)", () => {
  const v = load<{ seed: string; dst: string; binder: string; length: number; derived_seed: string; expanded_vec_field128: string }>(
    "XofTurboShake128.json",
  );
  const [seed, dst, binder] = [fromHex(v.seed), fromHex(v.dst), fromHex(v.binder)];
  assert.equal(toHex(XofTurboShake128.deriveSeed(seed, dst, binder)), v.derived_seed);
  const vec = XofTurboShake128.expandIntoVec(Field128, seed, dst, binder, v.length);
  assert.equal(toHex(Field128.encodeVec(vec)), v.expanded_vec_field128);
});

test("NTT and its inverse round-trip, the NTT evaluates at the roots of unity, oddEvaluations at the odd 2n-th roots", () => {
  for (const field of [Field64, Field128]) {
    const coeffs = [3n, 1n, 4n, 1n, 5n, 9n, 2n, 6n].map((c) => (c * 0x1234567890abcdefn) % field.modulus);
    const values = field.ntt(coeffs, 8);
    const roots = field.nthRootPowers(8);
    values.forEach((value, i) => assert.equal(value, field.polyEval(coeffs, roots[i] as bigint)));
    assert.deepEqual(field.invNtt(values, 8), coeffs);
    const odd = field.oddEvaluations(values);
    const roots16 = field.nthRootPowers(16);
    odd.forEach((value, i) => assert.equal(value, field.polyEval(coeffs, roots16[2 * i + 1] as bigint)));
  }
});

test("a measurement the circuit refuses names the field and the type, never the value", () => {
  const ctx = new Uint8Array(0);
  const nonce = new Uint8Array(16);
  const count = new Prio3Count(2);
  assert.throws(() => count.shard(ctx, 2, nonce, new Uint8Array(count.RAND_SIZE)), /Prio3Count measurement must be in \[0, 1\]; got a number outside it$/);
  assert.throws(() => count.shard(ctx, "1" as never, nonce, new Uint8Array(count.RAND_SIZE)), /Prio3Count measurement .*got string$/);
  const hist = new Prio3Histogram(2, 4, 2);
  assert.throws(() => hist.shard(ctx, 4, nonce, new Uint8Array(hist.RAND_SIZE)), /Prio3Histogram measurement must be in \[0, 3\]; got a number outside it/);
  assert.throws(() => hist.shard(ctx, 1, nonce, new Uint8Array(5)), /rand must be a Uint8Array of 128 bytes; got 5 bytes/);
  const multi = new Prio3MultihotCountVec(2, 3, 1, 2);
  assert.throws(() => multi.shard(ctx, [true, true, false], nonce, new Uint8Array(multi.RAND_SIZE)), /more than max_weight/);
  assert.throws(() => multi.shard(ctx, [true, 1, false] as never, nonce, new Uint8Array(multi.RAND_SIZE)), /measurement\[1\] must be a boolean; got a number/);
});
