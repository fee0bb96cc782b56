/**
 * Exact arithmetic on doubles for the numeric mechanisms' parameters: a double as the exact
 * fraction it is (Python's `Fraction(float)`), a fraction rounded correctly to a double
 * (Python's `float(Fraction)`), Python's `round` (half to even), and a correctly rounded
 * `exp`/`expm1` on BigInt fixed point.
 *
 * Why not `Math.exp`: the mechanisms' 64-bit thresholds come from `Fraction(math.exp(eps))`
 * (client_sdk/mechanisms/grid.py, `exp_below`), so one ulp changes a threshold. V8's `Math.exp`
 * (fdlibm) differs from glibc's `exp` in about one double in ten; glibc's is within 0.51 ulp,
 * so the correctly rounded value is glibc's except where the exact value lies within 0.01 ulp of
 * a rounding midpoint (test/exact-math.test.ts measures the agreement on Python's values).
 */

/** A non-negative or negative rational n/d with d > 0 (not necessarily reduced). */
export interface Fraction {
  readonly n: bigint;
  readonly d: bigint;
}

const FLOAT_VIEW = new DataView(new ArrayBuffer(8));

/** The exact value of a finite double as a fraction n / 2^k (Python's `Fraction(x)`). */
export function fractionOfDouble(x: number): Fraction {
  if (!Number.isFinite(x)) throw new RangeError(`a finite number is needed, got ${x}`);
  FLOAT_VIEW.setFloat64(0, x);
  const bits = FLOAT_VIEW.getBigUint64(0);
  const negative = bits >> 63n === 1n;
  const exponent = Number((bits >> 52n) & 0x7ffn);
  let mantissa = bits & ((1n << 52n) - 1n);
  let shift: number;
  if (exponent === 0) {
    shift = -1074;
  } else {
    mantissa |= 1n << 52n;
    shift = exponent - 1075;
  }
  const signed = negative ? -mantissa : mantissa;
  return shift >= 0 ? { n: signed << BigInt(shift), d: 1n } : { n: signed, d: 1n << BigInt(-shift) };
}

function bitLength(value: bigint): number {
  return value === 0n ? 0 : value.toString(2).length;
}

/** n/d rounded to the nearest double, ties to even (Python's `float(Fraction(n, d))`). */
export function doubleOfFraction(n: bigint, d: bigint): number {
  if (d === 0n) throw new RangeError("division by zero");
  if (d < 0n) return doubleOfFraction(-n, -d);
  if (n < 0n) return -doubleOfFraction(-n, d);
  if (n === 0n) return 0;
  // q = floor(n 2^k / d) with 2^53 <= q < 2^54: 53 bits of mantissa and the rounding bit
  const quotient = (shift: number): [bigint, bigint] => {
    const num = shift >= 0 ? n << BigInt(shift) : n;
    const den = shift >= 0 ? d : d << BigInt(-shift);
    return [num / den, num % den];
  };
  let k = 53 - (bitLength(n) - bitLength(d));
  let [q, r] = quotient(k);
  if (q >= 1n << 54n) [q, r] = quotient(--k);
  else if (q < 1n << 53n) [q, r] = quotient(++k);
  let mantissa = q >> 1n;
  if ((q & 1n) === 1n && (r !== 0n || (mantissa & 1n) === 1n)) mantissa += 1n;
  return Number(mantissa) * 2 ** (1 - k);
}

/** Python's `round(x)` of a double: the nearest integer, halves to even. */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Working precision of the fixed-point exponential, in bits. */
const PRECISION = 220n;
const ONE = 1n << PRECISION;

/** e^x for a double x as a fixed-point integer scaled by 2^PRECISION (|x| < 745). */
function expFixed(x: number): bigint {
  if (x < 0) return (ONE * ONE) / expFixed(-x);
  const { n, d } = fractionOfDouble(x);
  // r = x / 2^s with r < 2^-8; Taylor series of e^r; then square s times
  const s = Math.max(0, bitLength(n) - bitLength(d) + 8);
  let r = (n << PRECISION) / (d << BigInt(s));
  let sum = ONE;
  let term = ONE;
  for (let i = 1n; term !== 0n; i++) {
    term = (term * r) / (ONE * i);
    sum += term;
  }
  for (let i = 0; i < s; i++) sum = (sum * sum) >> PRECISION;
  r = sum;
  return r;
}

/** e^x correctly rounded to a double (for |x| < 700). */
export function exp(x: number): number {
  if (x === 0) return 1;
  return doubleOfFraction(expFixed(x), ONE);
}

/** e^x - 1 correctly rounded to a double (for |x| < 700 and |x| > 2^-60). */
export function expm1(x: number): number {
  if (x === 0) return 0;
  return doubleOfFraction(expFixed(x) - ONE, ONE);
}

/** The largest double below `x` (Python's `math.nextafter(x, 0)` for x > 0). */
export function nextDown(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) throw new RangeError(`nextDown needs a positive finite number, got ${x}`);
  FLOAT_VIEW.setFloat64(0, x);
  FLOAT_VIEW.setBigUint64(0, FLOAT_VIEW.getBigUint64(0) - 1n);
  return FLOAT_VIEW.getFloat64(0);
}

/**
 * A double at most e^x (client_sdk/mechanisms/grid.py `exp_below`: the double below
 * `math.exp(x)`), so that a ratio at most `expBelow(eps)` in exact arithmetic is at most e^eps.
 */
export function expBelow(x: number): number {
  return nextDown(exp(x));
}

/** 2^64: the span of a word. */
export const WORD_SPAN = 1n << 64n;

/**
 * The threshold T with P[word < T] = T/2^64 for the probability n/d (client_sdk/randomness.py
 * `probability_threshold`): n/d·2^64 rounded down, up or to nearest (halves to even), clamped
 * to [0, 2^64 - 1].
 */
export function probabilityThreshold(p: Fraction, rounding: "down" | "up" | "nearest"): bigint {
  let { n, d } = p;
  if (d < 0n) [n, d] = [-n, -d];
  if (n < 0n || n > d) throw new RangeError("probability must be in [0, 1]");
  const scaled = n * WORD_SPAN;
  let threshold = scaled / d;
  const remainder = scaled % d;
  if (rounding === "up" && remainder !== 0n) threshold += 1n;
  if (rounding === "nearest" && (2n * remainder > d || (2n * remainder === d && threshold % 2n === 1n))) {
    threshold += 1n;
  }
  return threshold > WORD_SPAN - 1n ? WORD_SPAN - 1n : threshold;
}
