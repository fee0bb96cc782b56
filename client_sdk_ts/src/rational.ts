/**
 * Exact rationals on BigInt (what Python's `fractions.Fraction` does for the thresholds), the
 * float64 values Python feeds them (`Fraction(math.exp(epsilon))`), and the 64-bit thresholds
 * of `client_sdk.randomness.probability_threshold`.
 */

export const WORD_SPAN = 1n << 64n;
export const MAX_WORD = WORD_SPAN - 1n;

function gcd(a: bigint, b: bigint): bigint {
  let x = a < 0n ? -a : a;
  let y = b < 0n ? -b : b;
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}

/** Floor division of BigInts (Python's `//`). */
export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** An exact rational number in lowest terms, the denominator positive. */
export class Rational {
  readonly num: bigint;
  readonly den: bigint;

  constructor(num: bigint, den: bigint = 1n) {
    if (den === 0n) throw new RangeError("Rational: zero denominator");
    if (den < 0n) {
      num = -num;
      den = -den;
    }
    const g = gcd(num, den);
    this.num = g > 1n ? num / g : num;
    this.den = g > 1n ? den / g : den;
  }

  static of(value: bigint | number | Rational): Rational {
    if (value instanceof Rational) return value;
    if (typeof value === "bigint") return new Rational(value);
    return Rational.fromDouble(value);
  }

  /** The exact value of a finite float64 (Python's `Fraction(float)`). */
  static fromDouble(value: number): Rational {
    if (!Number.isFinite(value)) throw new RangeError(`Rational.fromDouble: not finite (${typeof value})`);
    if (Number.isInteger(value) && Number.isSafeInteger(value)) return new Rational(BigInt(value));
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, value);
    const bits = view.getBigUint64(0);
    const negative = bits >> 63n === 1n;
    const exponent = Number((bits >> 52n) & 0x7ffn);
    const fraction = bits & ((1n << 52n) - 1n);
    const mantissa = exponent === 0 ? fraction : fraction | (1n << 52n);
    const shift = (exponent === 0 ? 1 : exponent) - 1075;
    const signed = negative ? -mantissa : mantissa;
    return shift >= 0 ? new Rational(signed << BigInt(shift)) : new Rational(signed, 1n << BigInt(-shift));
  }

  add(other: bigint | number | Rational): Rational {
    const o = Rational.of(other);
    return new Rational(this.num * o.den + o.num * this.den, this.den * o.den);
  }

  sub(other: bigint | number | Rational): Rational {
    const o = Rational.of(other);
    return new Rational(this.num * o.den - o.num * this.den, this.den * o.den);
  }

  mul(other: bigint | number | Rational): Rational {
    const o = Rational.of(other);
    return new Rational(this.num * o.num, this.den * o.den);
  }

  div(other: bigint | number | Rational): Rational {
    const o = Rational.of(other);
    if (o.num === 0n) throw new RangeError("Rational: division by zero");
    return new Rational(this.num * o.den, this.den * o.num);
  }

  pow(exponent: number): Rational {
    if (!Number.isSafeInteger(exponent) || exponent < 0) throw new RangeError("Rational.pow: exponent must be a non-negative integer");
    const e = BigInt(exponent);
    return new Rational(this.num ** e, this.den ** e);
  }

  /** -1, 0 or 1 as this is below, equal to or above `other`. */
  cmp(other: bigint | number | Rational): number {
    const o = Rational.of(other);
    const left = this.num * o.den;
    const right = o.num * this.den;
    return left < right ? -1 : left > right ? 1 : 0;
  }

  floor(): bigint {
    return floorDiv(this.num, this.den);
  }

  ceil(): bigint {
    return -floorDiv(-this.num, this.den);
  }

  /** Python's `round(Fraction)`: to the nearest integer, a half to the even one. */
  round(): bigint {
    const floor = this.floor();
    const twice = (this.num - floor * this.den) * 2n;
    if (twice < this.den) return floor;
    if (twice > this.den) return floor + 1n;
    return floor % 2n === 0n ? floor : floor + 1n;
  }

  /** The nearest float64 (ties to even), as Python's `float(Fraction)`. */
  toNumber(): number {
    if (this.num === 0n) return 0;
    const negative = this.num < 0n;
    const n = negative ? -this.num : this.num;
    // Scale so that the quotient has 55 significant bits at least, then round once.
    const shift = 55 - (bitLength(n) - bitLength(this.den));
    const scaledNum = shift >= 0 ? n << BigInt(shift) : n;
    const scaledDen = shift >= 0 ? this.den : this.den << BigInt(-shift);
    let quotient = scaledNum / scaledDen;
    const sticky = scaledNum % scaledDen !== 0n;
    let exponent = -shift; // value = quotient * 2^exponent (plus sticky)
    const length = bitLength(quotient);
    // Keep 53 bits, or fewer for subnormals (the smallest exponent of the last bit is -1074).
    const drop = Math.max(length - 53, -1074 - exponent);
    if (drop > 0) {
      const d = BigInt(drop);
      const rest = quotient & ((1n << d) - 1n);
      const half = 1n << (d - 1n);
      quotient >>= d;
      exponent += drop;
      if (rest > half || (rest === half && (sticky || (quotient & 1n) === 1n))) quotient += 1n;
    }
    const value = Number(quotient) * 2 ** exponent;
    return negative ? -value : value;
  }

  toString(): string {
    return this.den === 1n ? `${this.num}` : `${this.num}/${this.den}`;
  }
}

/** Number of bits of a non-negative BigInt (Python's `int.bit_length`). */
export function bitLength(value: bigint): number {
  if (value < 0n) throw new RangeError("bitLength: negative");
  return value === 0n ? 0 : value.toString(2).length;
}

export type Rounding = "down" | "up" | "nearest";

/**
 * The integer T with P[word < T] = T / 2^64 closest to `probability` in the stated direction,
 * clamped to [0, 2^64 - 1] (Python: `probability_threshold`).
 */
export function probabilityThreshold(probability: Rational | number, rounding: Rounding = "nearest"): bigint {
  const exact = Rational.of(probability);
  if (exact.cmp(0n) < 0 || exact.cmp(1n) > 0) {
    throw new RangeError(`probability must be in [0, 1]; got ${exact.toString()}`);
  }
  const scaled = exact.mul(WORD_SPAN);
  let threshold: bigint;
  if (rounding === "down") threshold = scaled.floor();
  else if (rounding === "up") threshold = scaled.ceil();
  else if (rounding === "nearest") threshold = scaled.round();
  else throw new RangeError(`rounding must be 'down', 'up' or 'nearest'; got ${typeof rounding}`);
  return threshold < 0n ? 0n : threshold > MAX_WORD ? MAX_WORD : threshold;
}

/** The exact probability T / 2^64 a threshold implements. */
export function thresholdProbability(threshold: bigint): Rational {
  return new Rational(threshold, WORD_SPAN);
}

// ---- exp: the float64 Python's math.exp gives, correctly rounded ----------------------------

const EXP_PRECISION = 192n;

/** e^x to `bits` fractional bits for a dyadic x = num / 2^shift (fixed point, error < 2^-bits·64). */
function expFixed(x: Rational, bits: bigint): bigint {
  // Reduce: x = n ln2 + r would need ln2; instead halve x until |x| < 2^-10, sum the series,
  // then square back. Work with `bits + guard` fractional bits.
  const guard = 64n;
  const precision = bits + guard;
  const one = 1n << precision;
  const magnitude = x.num < 0n ? -x.num : x.num;
  // |x| < 2^log2; halve until |r| < 2^-10
  const log2 = BigInt(bitLength(magnitude) - bitLength(x.den) + 1);
  const halvings = log2 > -10n ? log2 + 10n : 0n;
  // r = x / 2^halvings in fixed point
  const r = floorDiv(x.num << precision, x.den << halvings);
  let term = one;
  let sum = one;
  for (let i = 1n; term !== 0n; i++) {
    term = floorDiv(term * r, one * i);
    sum += term;
  }
  for (let i = 0n; i < halvings; i++) sum = (sum * sum) >> precision;
  return sum >> guard;
}

/**
 * The float64 nearest to e^x for a float64 x (correctly rounded; glibc's `exp`, which Python's
 * `math.exp` calls, agrees except within about 2^-11 ulp of a tie, which the tests check for the
 * epsilons of the vectors). `Math.exp` is not used: V8's may differ from glibc by one ulp.
 */
export function expDouble(x: number): number {
  if (!Number.isFinite(x)) throw new RangeError(`exp: not finite (${typeof x})`);
  if (x > 709.782712893384) return Infinity;
  if (x < -745.2) return 0;
  if (x === 0) return 1;
  const exact = Rational.fromDouble(x);
  for (let bits = EXP_PRECISION; ; bits *= 2n) {
    const fixed = expFixed(exact, bits);
    // The error of `fixed` is far below 2^-(bits - 80) relative; round both ends and compare.
    const slack = (fixed >> (bits - 48n)) + (1n << 16n);
    const low = new Rational(fixed - slack, 1n << bits).toNumber();
    const high = new Rational(fixed + slack, 1n << bits).toNumber();
    if (low === high) return low;
    if (bits > 4096n) return new Rational(fixed, 1n << bits).toNumber();
  }
}

/** `Fraction(math.exp(x))`: the exact value of the float64 e^x. */
export function expRational(x: number): Rational {
  return Rational.fromDouble(expDouble(x));
}
