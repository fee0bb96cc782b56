/**
 * The numeric kernels' privacy claims checked exactly from their integer thresholds, the
 * correctly rounded exp they are built on, and their output distributions by chi-square at a
 * fixed key against the exact channel (p = 1e-6).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { expBelow } from "../src/exact-math.js";
import { Rational, WORD_SPAN, expDouble } from "../src/rational.js";
import { DuchiKernel } from "../src/mechanisms/duchi.js";
import { PiecewiseKernel } from "../src/mechanisms/piecewise.js";
import { mechanismFromConfig } from "../src/mechanisms/registry.js";
import { SeededWords, assertChiSquare, assertWithinZ } from "./stats.js";

const EPSILONS = [0.1, 0.5, 0.6093524930273093, 1, 2, 3.7, 8, 40];

/** a/b <= e for the fraction e. */
const ratioAtMost = (a: bigint, b: bigint, e: Rational): boolean => a * e.den <= e.num * b;

test("expDouble is e^x correctly rounded: an independent Taylor sum on exact fractions agrees", () => {
  const source = new SeededWords(9);
  for (let i = 0; i < 60; i++) {
    const x = (Number((source.words(1)[0] as bigint) >> 11n) / 2 ** 53) * 8 - 4;
    const { num: n, den: d } = Rational.fromDouble(x);
    // e^x = sum_{j<90} x^j/j! (remainder below 2^-260 relative for |x| <= 4) by Horner's rule,
    // 1 + x(1 + x/2(1 + ... (1 + x/89))), exactly on fractions: the denominator stays d^89 89!
    let sumN = 1n;
    let sumD = 1n;
    for (let j = 89n; j >= 1n; j--) {
      [sumN, sumD] = [sumD * d * j + n * sumN, sumD * d * j];
    }
    assert.equal(expDouble(x), new Rational(sumN, sumD).toNumber(), `exp(${x})`);
    assert.ok(expBelow(x) < expDouble(x));
  }
  assert.equal(expDouble(1), Math.E);
});

test("Duchi's thresholds: T_hi/T_lo <= e (the double below e^eps) exactly, and T_lo is the least such", () => {
  for (const epsilon of EPSILONS) {
    const kernel = new DuchiKernel(epsilon);
    const e = Rational.fromDouble(expBelow(epsilon));
    assert.equal(kernel.highThreshold + kernel.lowThreshold, WORD_SPAN);
    assert.ok(ratioAtMost(kernel.highThreshold, kernel.lowThreshold, e), `eps=${epsilon}`);
    const tighter = kernel.lowThreshold - 1n;
    if (tighter >= 1n) assert.ok(!ratioAtMost(WORD_SPAN - tighter, tighter, e), `eps=${epsilon} not tight`);
  }
});

test("piecewise thresholds: p_hi/p_lo = T N/((2^64 - T) W) <= e exactly, and T is the largest such", () => {
  for (const epsilon of EPSILONS) {
    for (const steps of [16, 1 << 20]) {
      const kernel = new PiecewiseKernel(epsilon, steps);
      const e = Rational.fromDouble(expBelow(epsilon));
      const w = BigInt(kernel.window);
      const n = BigInt(steps);
      const t = kernel.insideThreshold;
      assert.ok(ratioAtMost(t * n, (WORD_SPAN - t) * w, e), `eps=${epsilon} N=${steps}`);
      assert.ok(!ratioAtMost((t + 1n) * n, (WORD_SPAN - t - 1n) * w, e), `eps=${epsilon} N=${steps} not tight`);
    }
  }
});

test("Haar and Fourier keep thresholds: T/(2^64 - T) <= e exactly, and T is the largest such", () => {
  for (const epsilon of EPSILONS.filter((x) => x <= 20)) {
    const haar = mechanismFromConfig({ mechanism: "hierarchical", variant: "haar", epsilon, k: 16 }) as unknown as {
      keepThreshold: bigint;
    };
    const fourier = mechanismFromConfig({ mechanism: "fourier", epsilon, attributes: [{ name: "a" }], order: 1 }) as unknown as {
      keepThreshold: bigint;
    };
    for (const [t, e] of [
      [haar.keepThreshold, Rational.fromDouble(expBelow(epsilon))],
      [fourier.keepThreshold, Rational.fromDouble(expDouble(epsilon))],
    ] as [bigint, Rational][]) {
      assert.ok(ratioAtMost(t, WORD_SPAN - t, e), `eps=${epsilon}`);
      assert.ok(!ratioAtMost(t + 1n, WORD_SPAN - t - 1n, e), `eps=${epsilon} not tight`);
    }
  }
});

const DRAWS = 20_000;

test("Duchi's output at t: P[1] = up T_hi + (1 - up) T_lo over 2^64, up the implemented rounding", () => {
  const kernel = new DuchiKernel(1);
  for (const t of [-1, -0.3, 0, 0.8, 1]) {
    const outputs = kernel.sample(new SeededWords(50), new Array<number>(DRAWS).fill(t));
    const phi = (t + 1) / 2 >= 1 ? 1 : (t + 1) / 2;
    const up = phi >= 1 ? 1 : Math.floor(phi * 2 ** 64) / 2 ** 64;
    const p = (up * Number(kernel.highThreshold) + (1 - up) * Number(kernel.lowThreshold)) / 2 ** 64;
    const ones = outputs.filter((o) => o === 1).length;
    assertWithinZ(ones, DRAWS * p, Math.sqrt(DRAWS * p * (1 - p)), `t=${t}`);
  }
});

test("the piecewise kernel's outputs follow its exact channel (N = 16)", () => {
  const kernel = new PiecewiseKernel(1, 16);
  const w = kernel.window;
  const pIn = Number(kernel.insideThreshold) / 2 ** 64;
  const high = pIn / w;
  const low = (1 - pIn) / 16;
  for (const t of [-1, 0.37, 1]) {
    const u = ((t + 1) / 2) * 16;
    const base = Math.min(Math.floor(u), 15);
    const phi = u - base;
    const up = phi >= 1 ? 1 : Math.floor(phi * 2 ** 64) / 2 ** 64;
    const cells = Array.from({ length: kernel.outputSize }, (_, j) => {
      const inWindow = (a: number): boolean => j >= a && j < a + w;
      return (1 - up) * (inWindow(base) ? high : low) + up * (inWindow(base + 1) ? high : low);
    });
    const counts = new Array<number>(kernel.outputSize).fill(0);
    for (const j of kernel.sample(new SeededWords(51), new Array<number>(DRAWS).fill(t))) counts[j] = (counts[j] as number) + 1;
    assertChiSquare(counts, cells, `piecewise t=${t}`);
  }
});
