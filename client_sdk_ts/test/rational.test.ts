import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_WORD, Rational, WORD_SPAN, expDouble, expRational, probabilityThreshold } from "../src/rational.js";

test("a float64 becomes its exact rational, as Python's Fraction(float)", () => {
  const tenth = Rational.fromDouble(0.1);
  assert.equal(tenth.num, 3602879701896397n);
  assert.equal(tenth.den, 36028797018963968n);
  assert.equal(Rational.fromDouble(-2.5).toString(), "-5/2");
  assert.equal(Rational.fromDouble(2 ** 70).toString(), `${2n ** 70n}`);
  assert.equal(Rational.fromDouble(5e-324).toString(), `1/${2n ** 1074n}`);
  for (const x of [0.1, 1 / 3, 2 ** -1074, 1.7976931348623157e308, -123.456]) {
    assert.equal(Rational.fromDouble(x).toNumber(), x);
  }
});

test("arithmetic stays exact and in lowest terms", () => {
  const third = new Rational(1n, 3n);
  assert.equal(third.add(new Rational(1n, 6n)).toString(), "1/2");
  assert.equal(third.mul(3n).toString(), "1");
  assert.equal(third.div(new Rational(2n, 3n)).toString(), "1/2");
  assert.equal(third.sub(1n).toString(), "-2/3");
  assert.equal(new Rational(2n, -4n).toString(), "-1/2");
  assert.equal(third.pow(3).toString(), "1/27");
  assert.equal(third.cmp(new Rational(2n, 6n)), 0);
  assert.equal(third.cmp(0.34), -1);
  assert.equal(new Rational(1n, 3n).toNumber(), 1 / 3);
  assert.equal(new Rational(2n, 3n).toNumber(), 2 / 3);
});

test("floor, ceil and Python's round (a half to the even integer)", () => {
  const cases: [bigint, bigint, bigint, bigint, bigint][] = [
    // num, den, floor, ceil, round
    [5n, 2n, 2n, 3n, 2n],
    [7n, 2n, 3n, 4n, 4n],
    [-5n, 2n, -3n, -2n, -2n],
    [-7n, 2n, -4n, -3n, -4n],
    [10n, 3n, 3n, 4n, 3n],
    [-10n, 3n, -4n, -3n, -3n],
    [4n, 1n, 4n, 4n, 4n],
  ];
  for (const [num, den, floor, ceil, round] of cases) {
    const r = new Rational(num, den);
    assert.equal(r.floor(), floor, `floor ${r}`);
    assert.equal(r.ceil(), ceil, `ceil ${r}`);
    assert.equal(r.round(), round, `round ${r}`);
  }
});

test("thresholds round p·2^64 down, up or to the nearest, clamped below 2^64", () => {
  const third = new Rational(1n, 3n);
  const floor = WORD_SPAN / 3n; // 2^64 = 3·floor + 1
  assert.equal(probabilityThreshold(third, "down"), floor);
  assert.equal(probabilityThreshold(third, "up"), floor + 1n);
  assert.equal(probabilityThreshold(third, "nearest"), floor);
  assert.equal(probabilityThreshold(new Rational(2n, 3n), "nearest"), 2n * floor + 1n);
  assert.equal(probabilityThreshold(1, "down"), MAX_WORD);
  assert.equal(probabilityThreshold(0, "up"), 0n);
  assert.equal(probabilityThreshold(0.5, "down"), 1n << 63n);
  // a half of the grid step goes to the even threshold, as Python's round(Fraction)
  assert.equal(probabilityThreshold(new Rational(1n, 2n ** 65n), "nearest"), 0n);
  assert.equal(probabilityThreshold(new Rational(3n, 2n ** 65n), "nearest"), 2n);
  assert.throws(() => probabilityThreshold(1.5, "down"), /probability must be in \[0, 1\]/);
  assert.throws(() => probabilityThreshold(0.5, "sideways" as "down"), /rounding must be/);
});

test("exp gives the float64 Python's math.exp gives (correctly rounded)", () => {
  // repr(math.exp(x)) under CPython on glibc
  const python: [number, number][] = [
    [0.5, 1.6487212707001282],
    [1, 2.718281828459045],
    [2, 7.38905609893065],
    [3, 20.085536923187668],
    [4, 54.598150033144236],
    [0.25, 1.2840254166877414],
    [1.5, 4.4816890703380645],
    [5, 148.4131591025766],
    [10, 22026.465794806718],
    [0.7, 2.0137527074704766],
    [0.05, 1.0512710963760241],
    [0.1, 1.1051709180756477],
    [700, 1.0142320547350045e304],
  ];
  for (const [x, expected] of python) assert.equal(expDouble(x), expected, `exp(${x})`);
  assert.equal(expDouble(0), 1);
  assert.equal(expRational(1).toNumber(), Math.E);
  // within one ulp of V8's Math.exp everywhere on a grid (the two may differ by one ulp)
  for (let i = -400; i <= 400; i++) {
    const x = i / 37;
    const mine = expDouble(x);
    const theirs = Math.exp(x);
    assert.ok(Math.abs(mine - theirs) <= Math.abs(theirs) * 2 ** -52, `exp(${x}): ${mine} vs ${theirs}`);
  }
});
