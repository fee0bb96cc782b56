/**
 * The natural log rounded correctly to the nearest double, from BigInt fixed point (RS+FD's
 * calibration starts from ``math.log``: glibc's is correctly rounded but in very rare cases,
 * V8's ``Math.log`` is fdlibm's). The core group's ``expDouble`` is the same for exp; glibc's
 * expm1 is fdlibm's, as V8's ``Math.expm1``, which is used as it is.
 */
import { Rational, bitLength } from "../rational.js";

/** Working precision in bits (far beyond the 53 a double keeps). */
const P = 320n;
const GUARD = 64n;

/** ln 2 · 2^(P + GUARD): 2 atanh(1/3). */
const LN2 = ((): bigint => {
  const unit = 1n << (P + GUARD);
  let sum = 0n;
  let power = unit / 3n;
  for (let k = 1n; power !== 0n; k += 2n) {
    sum += power / k;
    power /= 9n;
  }
  return 2n * sum;
})();

/** ln y correctly rounded (y a positive finite double). */
export function log(y: number): number {
  if (!(y > 0) || !Number.isFinite(y)) throw new RangeError(`log: y must be a positive finite number, got ${typeof y}`);
  if (y === 1) return 0;
  const f = Rational.fromDouble(y);
  // y = m·2^e with m in [1, 2)
  let e = bitLength(f.num) - bitLength(f.den);
  const atLeast = (k: number): boolean => (k >= 0 ? f.num >= f.den << BigInt(k) : f.num << BigInt(-k) >= f.den);
  if (!atLeast(e)) e -= 1;
  const q = P + GUARD;
  const unit = 1n << q;
  const m = e >= 0 ? (f.num << q) / (f.den << BigInt(e)) : (f.num << (q + BigInt(-e))) / f.den;
  // ln m = 2 atanh((m - 1)/(m + 1)), |t| <= 1/3
  const t = ((m - unit) << q) / (m + unit);
  const t2 = (t * t) >> q;
  let sum = 0n;
  let power = t;
  for (let k = 1n; power !== 0n; k += 2n) {
    sum += power / k;
    power = (power * t2) >> q;
  }
  return new Rational(2n * sum + BigInt(e) * LN2, unit).toNumber();
}

/** Python's `math.log` of a positive integer below 2^1024: ln of its nearest double. */
export function logInt(n: bigint): number {
  return log(Number(n));
}

/** ln of a positive fraction as Python's `log_fraction` (memoization.py): ln num - ln den. */
export function logFraction(value: Rational): number {
  return logInt(value.num) - logInt(value.den);
}
