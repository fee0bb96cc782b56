/**
 * The exact discrete samplers against their declared distributions (as tests/client_sdk/
 * test_sampling.py does for Python): Pearson chi-square at p = 1e-6 with a fixed key, one cell
 * per integer in the bulk plus the two tails pooled with their exact mass, and negative
 * controls showing the same test rejects a scale off by 7%.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  bernoulliExp,
  discreteGaussian,
  discreteGaussianAtLeast,
  discreteLaplace,
  floorFraction,
} from "../src/sampling.js";
import { Rational } from "../src/rational.js";
import { HmacWordSource } from "../src/words.js";
import { SeededWords, assertChiSquare, assertWithinZ, chiSquareScore } from "./stats.js";

const DRAWS = 20_000;

function words(seed: number): SeededWords {
  return new SeededWords(seed);
}

test("SeededWords is HmacWordSource's construction", () => {
  assert.deepEqual(new SeededWords(3).words(9), new HmacWordSource(new Uint8Array(32).fill(3)).words(9));
});

test("bernoulliExp has probability exp(-num/den), mixed gammas in one call", () => {
  const gammas: [number, number][] = [[0, 1], [1, 3], [1, 1], [2, 1], [7, 3], [9, 2], [3, 4], [50, 7]];
  const per = 5_000;
  const nums = gammas.flatMap(([a]) => new Array<bigint>(per).fill(BigInt(a)));
  const dens = gammas.flatMap(([, b]) => new Array<bigint>(per).fill(BigInt(b)));
  const draws = bernoulliExp(words(11), nums, dens);
  gammas.forEach(([a, b], i) => {
    const hits = draws.slice(i * per, (i + 1) * per).filter(Boolean).length;
    const p = Math.exp(-a / b);
    if (p === 1) assert.equal(hits, per);
    else assertWithinZ(hits, per * p, Math.sqrt(per * p * (1 - p)), `gamma=${a}/${b}`);
  });
});

/** P[X = x] of the discrete Laplace of scale t/s: (1 - r)/(1 + r) r^|x|, r = e^(-s/t). */
function laplacePmf(scale: number, x: number): number {
  const r = Math.exp(-1 / scale);
  return (-Math.expm1(-1 / scale) / (1 + r)) * Math.exp(-Math.abs(x) / scale);
}

function laplaceTail(scale: number, x: number): number {
  return Math.exp(-x / scale) / (1 + Math.exp(-1 / scale));
}

function histogram(samples: readonly bigint[], bulk: number): number[] {
  const out = new Array<number>(2 * bulk + 3).fill(0);
  for (const s of samples) {
    const x = Math.min(Math.max(Number(s), -bulk - 1), bulk + 1);
    out[x + bulk + 1] = (out[x + bulk + 1] as number) + 1;
  }
  return out;
}

function laplaceCells(scale: number, bulk: number): number[] {
  const tail = laplaceTail(scale, bulk + 1);
  const inner = Array.from({ length: 2 * bulk + 1 }, (_, i) => laplacePmf(scale, i - bulk));
  return [tail, ...inner, tail];
}

for (const [t, s] of [[1n, 3n], [1n, 1n], [7n, 3n], [40n, 1n], [1001n, 10n]] as [bigint, bigint][]) {
  test(`discreteLaplace(${t}/${s}) matches its pmf, tails included`, () => {
    const scale = Number(t) / Number(s);
    const samples = discreteLaplace(words(20), t, s, DRAWS);
    // each tail cell expects about 40 draws, so the tails are tested
    const bulk = Math.max(1, Math.floor(scale * Math.log(DRAWS / 40 / (1 + Math.exp(-1 / scale)))));
    assertChiSquare(histogram(samples, bulk), laplaceCells(scale, bulk), `Lap_Z(${t}/${s})`);
  });
}

test("the chi-square test rejects a discrete Laplace of the wrong scale", () => {
  const samples = discreteLaplace(words(21), 7n, 3n, DRAWS);
  assert.ok(chiSquareScore(histogram(samples, 20), laplaceCells(2.5, 20)) > 4.75);
});

function gaussianCells(sigma2: number, bulk: number): number[] {
  const weight = (x: number): number => Math.exp(-(x * x) / (2 * sigma2));
  let normalizer = 0;
  const reach = Math.ceil(60 * Math.sqrt(sigma2)) + 60;
  for (let x = -reach; x <= reach; x++) normalizer += weight(x);
  let tail = 0;
  for (let x = bulk + 1; x <= reach; x++) tail += weight(x) / normalizer;
  const inner = Array.from({ length: 2 * bulk + 1 }, (_, i) => weight(i - bulk) / normalizer);
  return [tail, ...inner, tail];
}

for (const [t, m] of [[1n, 1n], [2n, 3n], [7n, 7n], [30n, 31n], [4n, 13n]] as [bigint, bigint][]) {
  test(`discreteGaussian(${t}·${m}) matches its pmf, tails included`, () => {
    const sigma2 = Number(t * m);
    const samples = discreteGaussian(words(30), t, m, DRAWS);
    let bulk = 1;
    while (DRAWS * (gaussianCells(sigma2, bulk + 1)[0] as number) >= 20) bulk += 1;
    assertChiSquare(histogram(samples, bulk), gaussianCells(sigma2, bulk), `N_Z(0, ${t}·${m})`);
  });
}

test("the chi-square test rejects a discrete Gaussian of the wrong sigma", () => {
  const samples = discreteGaussian(words(31), 7n, 7n, DRAWS);
  assert.ok(chiSquareScore(histogram(samples, 20), gaussianCells(56, 20)) > 4.75);
});

test("samplers are reproducible from the same words and differ across keys", () => {
  assert.deepEqual(discreteLaplace(words(5), 7n, 3n, 50), discreteLaplace(words(5), 7n, 3n, 50));
  assert.notDeepEqual(discreteGaussian(words(5), 7n, 7n, 50), discreteGaussian(words(6), 7n, 7n, 50));
});

test("floorFraction is the best lower approximation (exhaustive over small denominators)", () => {
  const source = words(40);
  for (let trial = 0; trial < 300; trial++) {
    const [a, b, c] = source.words(3) as unknown as [bigint, bigint, bigint];
    const n = a % 1_000_000_000n;
    const d = (b % 1_000_000_000n) + 1n;
    const maxDen = (c % 400n) + 1n;
    const got = floorFraction(new Rational(n, d), maxDen);
    assert.ok(got.den >= 1n && got.den <= maxDen, "denominator bound");
    assert.ok(got.num * d <= n * got.den, "at most the value");
    // the best p/q <= n/d over every q <= maxDen: p = floor(n q / d)
    for (let q = 1n; q <= maxDen; q++) {
      const p = (n * q) / d;
      assert.ok(p * got.den <= got.num * q, `${n}/${d} max ${maxDen}: ${p}/${q} beats ${got}`);
    }
  }
});

test("discreteGaussianAtLeast: sigma^2 = t m just above the target, t near sigma", () => {
  for (const target of [1.0, 17.3, 4096 ** 2 + 256, 3.9e12]) {
    const { t, m } = discreteGaussianAtLeast(target);
    const sigma2 = Number(t * m);
    assert.ok(target <= sigma2 && sigma2 < target + Number(t), `${target}`);
    assert.ok(0.75 * Math.sqrt(target) - 3 <= Number(t) && Number(t) <= Math.sqrt(target) + 1);
  }
  const { t, m } = discreteGaussianAtLeast(1.2345e13);
  assert.ok(Number(t * m) / 1.2345e13 - 1 < 1e-9);
  assert.throws(() => discreteGaussianAtLeast(Number.NaN), /sigma2 must be a positive finite number, got NaN/);
});
