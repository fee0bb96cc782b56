/**
 * exp and log rounded correctly to the nearest double, from BigInt fixed point.
 *
 * Python's thresholds start from ``math.exp`` (glibc: correctly rounded but in very rare cases);
 * V8's ``Math.exp`` (fdlibm) is off by one ulp far more often (e.g. at 1.8372365326216968), which
 * changes a 64-bit threshold. The correctly rounded value is what glibc returns, so a port that
 * computes it reproduces Python's doubles, hence its thresholds. (glibc's expm1 is fdlibm's, as
 * V8's ``Math.expm1``: that one is used as it is.)
 */

/** Working precision in bits (far beyond the 53 a double keeps). */
const P = 320n;
const ONE = 1n << P;

/** A finite double as an exact (num, den), den a power of two. */
function exactDouble(x: number): { num: bigint; den: bigint } {
  if (Number.isInteger(x)) return { num: BigInt(x), den: 1n };
  let den = 1n;
  let scaled = x;
  while (!Number.isInteger(scaled)) {
    scaled *= 2; // exact: a finite non-integer double has at most 1074 fraction bits
    den *= 2n;
  }
  return { num: BigInt(scaled), den };
}

/** A double as a fixed-point number (value·2^P, truncated toward zero). */
function fixed(x: number): bigint {
  const f = exactDouble(x);
  return (f.num << P) / f.den;
}

/** The nearest double to an exact positive fraction (Python's ``float(Fraction)``). */
export function fractionToDouble(f: { readonly num: bigint; readonly den: bigint }): number {
  if (f.num === 0n) return 0;
  const negative = f.num < 0n;
  const num = negative ? -f.num : f.num;
  const shift = Math.max(0, 64 + f.den.toString(2).length - num.toString(2).length);
  const scaled = num << BigInt(shift);
  const q = scaled / f.den;
  const r = scaled - q * f.den;
  const extra = q.toString(2).length - 53;
  let mantissa = q >> BigInt(extra);
  const rest = q & ((1n << BigInt(extra)) - 1n);
  const half = 1n << BigInt(extra - 1);
  if (rest > half || (rest === half && (r !== 0n || (mantissa & 1n) === 1n))) mantissa += 1n;
  const value = Number(mantissa) * 2 ** (extra - shift);
  return negative ? -value : value;
}


/** e^(X/2^P) · 2^P for a fixed-point X: Taylor series after halving s times, squared back. */
function expFixed(xFixed: bigint): bigint {
  const magnitude = xFixed < 0n ? -xFixed : xFixed;
  const s = BigInt(Math.max(0, magnitude.toString(2).length - Number(P) + 12));
  const extra = 64n + s; // guard bits lost to the squarings
  const q = P + extra;
  const reduced = (xFixed << extra) >> s;
  const unit = 1n << q;
  let term = unit;
  let sum = unit;
  for (let i = 1n; term !== 0n; i++) {
    term = (term * reduced) / (unit * i);
    sum += term;
  }
  for (let i = 0n; i < s; i++) sum = (sum * sum) >> q;
  return sum >> extra;
}

/** e^x correctly rounded (x finite, |x| < 700). */
export function exp(x: number): number {
  if (x === 0) return 1;
  return fractionToDouble({ num: expFixed(fixed(x)), den: ONE });
}

/** ln 2 · 2^P: 2 atanh(1/3). */
const LN2 = ((): bigint => {
  const q = P + 64n;
  const unit = 1n << q;
  let sum = 0n;
  let power = unit / 3n;
  for (let k = 1n; power !== 0n; k += 2n) {
    sum += power / k;
    power /= 9n;
  }
  return (2n * sum) >> 64n;
})();

/** ln y correctly rounded (y a positive finite double). */
export function log(y: number): number {
  if (!(y > 0) || !Number.isFinite(y)) throw new RangeError("log: y must be a positive finite number");
  if (y === 1) return 0;
  const f = exactDouble(y);
  // y = m·2^e with m in [1, 2)
  let e = f.num.toString(2).length - f.den.toString(2).length;
  const at = (k: number): boolean => (k >= 0 ? f.num >= f.den << BigInt(k) : f.num << BigInt(-k) >= f.den);
  if (!at(e)) e -= 1;
  const q = P + 64n;
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
  const result = ((2n * sum) >> 64n) + BigInt(e) * LN2;
  return fractionToDouble({ num: result, den: ONE });
}
