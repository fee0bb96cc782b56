import { test } from "node:test";
import assert from "node:assert/strict";
import { DeviceKeys } from "../src/memoization.js";
import {
  DBitFlip,
  GRR,
  HadamardResponse,
  LocalHashing,
  Rappor,
  SubsetSelection,
  UnaryEncoding,
  keepOrOther,
  randomizedResponseChainThreshold,
} from "../src/mechanisms/categorical.js";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { MAX_WORD, Rational, WORD_SPAN, expRational, thresholdProbability } from "../src/rational.js";
import { HmacWordSource } from "../src/words.js";
import { ListWordSource } from "./support.js";

function nextDown(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

function nextUp(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) + 1n);
  return view.getFloat64(0);
}

const EPSILONS = [0.1, 0.5, 1, 1.5, 2, 3, 4, 7.25];
const ONE = new Rational(1n);

/** T is the largest threshold whose ratio stays within the bound: ratio(T) <= bound < ratio(T + 1). */
function assertTight(ratio: (t: bigint) => Rational, threshold: bigint, bound: Rational, what: string): void {
  assert.ok(ratio(threshold).cmp(bound) <= 0, `${what}: the implemented ratio exceeds e^eps`);
  if (threshold < MAX_WORD) assert.ok(ratio(threshold + 1n).cmp(bound) > 0, `${what}: not the largest threshold`);
}

test("GRR, OLH/BLH and HR keep thresholds are the largest with p(outputs - 1)/(1 - p) <= e^eps", () => {
  for (const eps of EPSILONS) {
    const e = expRational(eps);
    for (const k of [2, 5, 1000]) {
      const grr = new GRR(eps, k);
      const ratio = (t: bigint): Rational => thresholdProbability(t).mul(BigInt(k - 1)).div(ONE.sub(thresholdProbability(t)));
      assertTight(ratio, grr.keepThreshold, e, `grr eps=${eps} k=${k}`);
    }
    for (const g of [2, 8, 64]) {
      const lh = new LocalHashing("olh", eps, 100, g);
      const ratio = (t: bigint): Rational => thresholdProbability(t).mul(BigInt(g - 1)).div(ONE.sub(thresholdProbability(t)));
      assertTight(ratio, lh.keepThreshold, e, `olh eps=${eps} g=${g}`);
    }
    for (const [k, blocks] of [[10, 1], [10, 10], [1000, 7]] as const) {
      const hr = new HadamardResponse(eps, k, blocks);
      const others = BigInt(2 * blocks - 1);
      const ratio = (t: bigint): Rational => thresholdProbability(t).mul(others).div(ONE.sub(thresholdProbability(t)));
      assertTight(ratio, hr.keepThreshold, e, `hr eps=${eps} B=${blocks}`);
    }
  }
});

test("SUE and OUE: p rounded down, q up, the pair ratio p(1-q)/(q(1-p)) within e^eps and tight", () => {
  for (const eps of EPSILONS) {
    const e = expRational(eps);
    for (const name of ["sue", "oue"] as const) {
      const ue = new UnaryEncoding(name, eps, 12);
      const [tp, tq] = ue.thresholds;
      const q = thresholdProbability(tq);
      const ratio = (t: bigint): Rational => {
        const p = thresholdProbability(t);
        return p.mul(ONE.sub(q)).div(q.mul(ONE.sub(p)));
      };
      assert.ok(ratio(tp).cmp(e) <= 0, `${name} eps=${eps}`);
      let half = e;
      if (name === "oue") assert.equal(tp, 1n << 63n);
      else {
        // half: the largest float64 whose square is at most the float e^eps
        half = Rational.fromDouble(Math.sqrt(e.toNumber()));
        while (half.pow(2).cmp(e) > 0) half = Rational.fromDouble(nextDown(half.toNumber()));
        assert.ok(Rational.fromDouble(nextUp(half.toNumber())).pow(2).cmp(e) > 0);
        const ideal = half.div(half.add(1n));
        assert.ok(thresholdProbability(tp).cmp(ideal) <= 0 && thresholdProbability(tp + 1n).cmp(ideal) > 0, `sue p rounds down`);
      }
      // q = 1/(half + 1) rounded up
      const idealQ = ONE.div(half.add(1n));
      assert.ok(q.cmp(idealQ) >= 0 && thresholdProbability(tq - 1n).cmp(idealQ) < 0, `${name} q rounds up`);
    }
  }
});

test("SS inclusion: p(k-d)/((1-p)d) <= e^eps, tight; dBitFlip p/(1-p) within e^(eps/2)", () => {
  for (const eps of EPSILONS) {
    const e = expRational(eps);
    for (const [k, d] of [[10, 3], [300, 100], [10, 8]] as const) {
      const ss = new SubsetSelection(eps, k, d);
      const ratio = (t: bigint): Rational =>
        thresholdProbability(t).mul(BigInt(k - d)).div(ONE.sub(thresholdProbability(t)).mul(BigInt(d)));
      assertTight(ratio, ss.includeThreshold, e, `ss eps=${eps} k=${k} d=${d}`);
      // the column profile's R is the same ratio, written through C(k-1, d-1) and C(k-1, d)
      assert.equal(ss.columnProfile().high.cmp(ratio(ss.includeThreshold)), 0);
    }
    const dbf = new DBitFlip(eps, 16, 4, false);
    const [high, low] = dbf.thresholds;
    assert.equal(high + low, WORD_SPAN);
    const halfBound = expRational(eps / 2);
    const bitRatio = (t: bigint): Rational => thresholdProbability(t).div(ONE.sub(thresholdProbability(t)));
    assertTight(bitRatio, high, halfBound, `dbitflip eps=${eps}`);
  }
});

test("L-GRR: the instantaneous keep is the largest whose composed P'/Q' stays within e^eps", () => {
  for (const [eps, permanent, k] of [[1, 4, 5], [0.5, 2, 3], [2, 2, 2], [1, 8, 1000]] as const) {
    const p1 = thresholdProbability(new GRR(permanent, k).keepThreshold);
    const t2 = randomizedResponseChainThreshold(p1, k, expRational(eps));
    const ratio = (t: bigint): Rational => {
      const p2 = thresholdProbability(t);
      const q1 = ONE.sub(p1).div(BigInt(k - 1));
      const q2 = ONE.sub(p2).div(BigInt(k - 1));
      return p1.mul(p2).add(ONE.sub(p1).mul(q2)).div(q1.mul(p2).add(ONE.sub(q1).mul(q2)));
    };
    assertTight(ratio, t2, expRational(eps), `l-grr eps=${eps} E=${permanent} k=${k}`);
  }
});

/** Largest |z| of observed counts against the channel's probabilities (binomial per cell). */
function maxZ(counts: readonly number[], probabilities: readonly number[], n: number): number {
  return Math.max(...counts.map((c, i) => Math.abs(c - n * probabilities[i]!) / Math.sqrt(n * probabilities[i]! * (1 - probabilities[i]!))));
}

test("GRR reports follow the declared channel (20,000 reports at a fixed seed, every cell within 4.5 z)", () => {
  const k = 5;
  const grr = new GRR(1, k);
  const n = 20000;
  const reports = grr.perturb(new Array<number>(n).fill(2), { rng: new HmacWordSource(new Uint8Array(32).fill(1)) });
  const counts = new Array<number>(k).fill(0);
  for (const r of reports) counts[r]! += 1;
  const p = thresholdProbability(grr.keepThreshold).toNumber();
  const expected = counts.map((_, i) => (i === 2 ? p : (1 - p) / (k - 1)));
  assert.ok(maxZ(counts, expected, n) < 4.5, `counts ${counts}`);
});

test("OUE, SS and HR reports follow their declared channels at a fixed seed", () => {
  const n = 20000;
  const rng = new HmacWordSource(new Uint8Array(32).fill(2));
  const oue = new UnaryEncoding("oue", 1, 12);
  const [p, q] = oue.implemented.map((r) => r.toNumber()) as [number, number];
  const ones = new Array<number>(12).fill(0);
  for (const row of oue.perturb(new Array<number>(n).fill(3), { rng })) {
    for (let i = 0; i < 12; i++) ones[i]! += (row[i >> 3]! >> (7 - (i & 7))) & 1;
  }
  assert.ok(maxZ(ones, ones.map((_, i) => (i === 3 ? p : q)), n) < 4.5, `oue ${ones}`);

  const ss = new SubsetSelection(1, 10, 3);
  const pi = thresholdProbability(ss.includeThreshold).toNumber();
  const member = new Array<number>(10).fill(0);
  for (const row of ss.perturb(new Array<number>(n).fill(9), { rng })) {
    let size = 0;
    for (let i = 0; i < 10; i++) {
      const bit = (row[i >> 3]! >> (7 - (i & 7))) & 1;
      member[i]! += bit;
      size += bit;
    }
    assert.equal(size, 3);
  }
  const others = (3 - pi) / 9; // (d - p)/(k - 1)
  assert.ok(maxZ(member, member.map((_, i) => (i === 9 ? pi : others)), n) < 4.5, `ss ${member}`);

  // HR with one block of b = 16: outputs 0..15; x = 4 (row 5) is in the half-set of o when
  // parity(5 & o) is even, each such output with probability p/8, the others (1 - p)/8
  const hr = new HadamardResponse(1, 10, 1);
  const keep = thresholdProbability(hr.keepThreshold).toNumber();
  const histogram = new Array<number>(16).fill(0);
  for (const y of hr.perturb(new Array<number>(n).fill(4), { rng })) histogram[y]! += 1;
  const parityEven = (o: number): boolean => ((5 & o).toString(2).split("1").length - 1) % 2 === 0;
  const expected = histogram.map((_, o) => (parityEven(o) ? keep / 8 : (1 - keep) / 8));
  assert.ok(maxZ(histogram, expected, n) < 4.5, `hr ${histogram}`);
});

test("keepOrOther skips the value, draws no word for two symbols unless asked", () => {
  // keep words: 0 < T keeps; MAX does not; the other 1 (of [0, 4)) skips value 1 -> 2
  const source = new ListWordSource([0n, MAX_WORD, 0n, 1n]);
  assert.deepEqual(keepOrOther(source, [3, 1], 1n << 63n, 5), [3, 2]);
  assert.equal(source.left, 0); // two keep words, then one uniform word per value
  const two = new ListWordSource([MAX_WORD]);
  assert.deepEqual(keepOrOther(two, [1], 1n << 63n, 2), [0]);
  assert.equal(two.left, 0);
});

test("bad input: errors name the field and the type, never a private value", () => {
  const grr = mechanismFromConfig({ mechanism: "grr", epsilon: 1.0, k: 5 });
  assert.throws(() => grr.perturb([7]), (e: Error) => /values\[0\] must be in \[0, 5\)/.test(e.message) && !e.message.includes("7"));
  assert.throws(() => grr.perturb(["dark"]), (e: Error) => /values\[0\] must be an integer in \[0, 5\); got string/.test(e.message) && !e.message.includes("dark"));
  assert.throws(() => grr.perturb([1.5]), /values\[0\] must be an integer in \[0, 5\); got number/);
  assert.throws(() => mechanismFromConfig({ mechanism: "grr", epsilon: 1.0 }), /missing k/);
  assert.throws(() => mechanismFromConfig({ mechanism: "grr", epsilon: 1.0, k: 5, extra: 1 }), /unknown field\(s\) extra/);
  assert.throws(() => mechanismFromConfig({ mechanism: "grr", epsilon: "1", k: 5 }), /epsilon must be a finite number; got string/);
  assert.throws(() => mechanismFromConfig({ mechanism: "ss", epsilon: 1.0, k: 5, d: 5 }), /d must be in \[1, 4\]/);
  assert.throws(
    () => mechanismFromConfig({ mechanism: "grr", epsilon: 2.0, k: 5, longitudinal: { epsilon_permanent: 1.0 } }),
    /epsilon_permanent must be >= epsilon/,
  );
  assert.throws(() => mechanismFromConfig({ mechanism: "nope" }), /"nope" is not supported in this version/);
});

test("memoized mechanisms need the device's keys; unmemoized ones refuse them", () => {
  const keys = new DeviceKeys(new Uint8Array(32).fill(9), "0123456789abcdef0123456789abcdef");
  const memo = mechanismFromConfig({ mechanism: "grr", epsilon: 1.0, k: 5, longitudinal: { epsilon_permanent: 4.0 } });
  assert.throws(() => memo.perturb([1]), /grr: perturb needs \{keys\}/);
  const rappor = mechanismFromConfig({ mechanism: "rappor", k: 32, h: 2, m: 8, f: 0.25, p: 0.25, q: 0.75 });
  assert.throws(() => rappor.perturb(["x"]), /rappor: perturb needs \{keys\}/);
  assert.throws(() => mechanismFromConfig({ mechanism: "dbitflip", epsilon: 1.0, k: 16, d: 4 }).perturb([1]), /dbitflip: perturb needs/);
  const plain = mechanismFromConfig({ mechanism: "dbitflip", epsilon: 1.0, k: 16, d: 4, memoize: false });
  assert.throws(() => plain.perturb([1], { keys }), /memoize=false is not memoized; it takes no keys/);
  assert.throws(() => mechanismFromConfig({ mechanism: "grr", epsilon: 1.0, k: 5 }).perturb([1], { keys }), /not memoized/);
  // the permanent response is the same for the same keys; the instantaneous one varies
  const first = memo.perturb(new Array<number>(200).fill(3), { keys, rng: new HmacWordSource(new Uint8Array(16).fill(1)) });
  const counts = new Map<unknown, number>();
  for (const r of first) counts.set(r, (counts.get(r) ?? 0) + 1);
  assert.ok(counts.size > 1);
});

test("RAPPOR's report bits are written bit k-1 first and its cohort comes from the keyed source", () => {
  const rappor = new Rappor(8, 2, 4, 0.5, 0.25, 0.75);
  const wire = rappor.toWire([{ cohort: 3, bits: [true, false, false, false, false, false, false, false] }]);
  assert.deepEqual(wire, [{ cohort: 3, bits: "00000001" }]);
  const keys = new DeviceKeys(new Uint8Array(32).fill(5), "scope");
  const expected = Number(keys.source("rappor-cohort", 0).words(1)[0]! % 4n);
  assert.equal(rappor.cohort(keys), expected);
});
