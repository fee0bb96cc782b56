/**
 * Zero-concentrated DP converted to (epsilon, delta)-DP, as the device checks a `"gaussian:RHO"`
 * secure-aggregation task against the app's central ceiling (Python: `client_sdk.zcdp`;
 * docs/math/dap-noise.md, "The device's ceiling"), and the parser of a task's `dp`
 * (Python: `client_sdk.dap.campaign.dp_parameter`).
 *
 * A rho-zCDP mechanism has Renyi divergence at most `alpha * rho` at every order alpha > 1 (Bun &
 * Steinke, TCC 2016, Def. 1.1). Its epsilon at a delta is the Renyi conversion of Canonne, Kamath,
 * Steinke (NeurIPS 2020, Corollary 13; Balle et al., AISTATS 2020), minimised over the same fixed
 * grid of orders as Python: every order gives a valid bound, so the grid only decides how tight it
 * is, and the same grid makes the device agree with Python to rounding.
 */
import { describe } from "./config.js";
import { Rational } from "./rational.js";

/**
 * numpy's `geomspace(start, stop, num)` for positive `start < stop`: `10 ** linspace(log10 start,
 * log10 stop, num)` with both ends set exactly. V8's `Math.pow` and `Math.log10` are fdlibm's, not
 * glibc's: on the grid below 30 of the 400 values differ from numpy's by one ulp, which moves an
 * epsilon by about 1e-16 relative (the conformance triples are met within 1e-15).
 */
function geomspace(start: number, stop: number, num: number): number[] {
  const logStart = Math.log10(start);
  const step = (Math.log10(stop) - logStart) / (num - 1);
  const result = Array.from({ length: num }, (_, i) => 10 ** (i * step + logStart));
  result[0] = start;
  result[num - 1] = stop;
  return result;
}

/**
 * Renyi orders for the RDP bound: dense near 1 (large compositions) and geometric above; numpy's
 * `unique(concatenate([1 + arange(1, 100) / 100, geomspace(2, 1e5, 400)]))` (sorted, no repeats).
 */
export const DEFAULT_ORDERS: readonly number[] = Object.freeze(
  [...new Set([...Array.from({ length: 99 }, (_, k) => 1 + (k + 1) / 100), ...geomspace(2, 1e5, 400)])].sort((a, b) => a - b),
);

function checkDelta(delta: unknown): number {
  if (typeof delta !== "number" || !(delta >= 0 && delta < 1)) {
    throw new RangeError(`delta must be a number in [0, 1); got ${describe(delta)}`);
  }
  return delta;
}

function checkCurve(values: unknown, field: string): readonly number[] {
  if (!Array.isArray(values) && !(values instanceof Float64Array)) {
    throw new TypeError(`${field} must be an array of numbers; got ${describe(values)}`);
  }
  const numbers = Array.from(values as ArrayLike<unknown>);
  numbers.forEach((value, i) => {
    if (typeof value !== "number" || Number.isNaN(value)) {
      throw new TypeError(`${field}[${i}] must be a number, not NaN; got ${Number.isNaN(value) ? "NaN" : describe(value)}`);
    }
  });
  return numbers as number[];
}

/**
 * Convert an RDP curve (`rdp[i]` at order `orders[i]`) to epsilon at `delta`, minimised over the
 * orders: eps = rdp(alpha) + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (Balle, Barthe,
 * Gaboardi, Hsu, Sato, AISTATS 2020; Canonne, Kamath, Steinke 2020, Prop. 12), with the KL
 * shortcut eps = 0 where delta >= sqrt(1 - e^-rdp) (Bretagnolle-Huber), as Python's
 * `rdp_to_epsilon`. `delta = 0` gives 0 for a curve of zeros, infinity otherwise. NaN entries
 * are refused (Python lets a NaN term count as infinity).
 */
export function rdpToEpsilon(orders: readonly number[] | Float64Array, rdp: readonly number[] | Float64Array, delta: number): number {
  const d = checkDelta(delta);
  const a = checkCurve(orders, "orders");
  const r = checkCurve(rdp, "rdp");
  if (a.length !== r.length || a.length === 0) {
    throw new RangeError(`orders and rdp must be non-empty and of the same length; got ${a.length} and ${r.length}`);
  }
  const low = a.findIndex((alpha) => !(alpha > 1));
  if (low >= 0) throw new RangeError(`orders[${low}] must be > 1; got ${describe(a[low])}`);
  if (d === 0) return r.every((value) => value === 0) ? 0 : Infinity;
  const logDelta = Math.log(d);
  let best = Infinity;
  a.forEach((alpha, i) => {
    const value = r[i] as number;
    let eps = value + Math.log1p(-1 / alpha) - (logDelta + Math.log(alpha)) / (alpha - 1);
    if (d * d + Math.expm1(-value) > 0) eps = 0;
    if (Number.isNaN(eps)) eps = Infinity;
    best = Math.min(best, eps);
  });
  return Math.max(0, best);
}

/**
 * The epsilon of rho-zCDP at `delta` (module comment): the Renyi curve `alpha * rho` converted over
 * {@link DEFAULT_ORDERS} (Python: `zcdp_epsilon`). `rho` may be the exact value {@link dpParameter}
 * reads; it is used as its nearest double, as Python's `float(Fraction)`.
 */
export function zcdpEpsilon(rho: number | Rational, delta: number): number {
  const value = rho instanceof Rational ? rho.toNumber() : rho;
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    const got = rho instanceof Rational ? `a Rational ${rho.num <= 0n ? "<= 0" : "outside the doubles' range"}` : describe(rho);
    throw new RangeError(`rho must be a positive finite number; got ${got}`);
  }
  return rdpToEpsilon(DEFAULT_ORDERS, DEFAULT_ORDERS.map((alpha) => alpha * value), delta);
}

// ---- dp: "none", "laplace:EPSILON" or "gaussian:RHO" ----------------------------------------

/** The DP strategies of a DAP task (Python: `DP_FORMS`; docs/math/dap-noise.md). */
export const DP_FORMS = '"none", "laplace:EPSILON" or "gaussian:RHO" (EPSILON, RHO > 0)';

/** A task's `dp` read by {@link dpParameter}: the kind of the Aggregators' noise and its parameter. */
export type DpParameter =
  | { readonly kind: "none"; readonly parameter: null }
  | { readonly kind: "laplace" | "gaussian"; readonly parameter: Rational };

// Python's `\s` and `\d` on a str: str.isspace() and the Unicode decimal digits (Nd).
const SPACE = "[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const DIGITS = "\\p{Nd}+(?:_\\p{Nd}+)*";

/**
 * Python 3.11's `fractions._RATIONAL_FORMAT` (the repository's interpreter): an optional sign, then
 * a ratio of integers or a decimal with an optional exponent, digits grouped by single `_`,
 * whitespace around. Python 3.10 refuses the `_`; 3.12 also admits spaces around the `/`.
 */
const RATIONAL_FORMAT = new RegExp(
  `^${SPACE}*([-+]?)(?=\\p{Nd}|\\.\\p{Nd})(${DIGITS})?(?:/(${DIGITS})|(?:\\.(${DIGITS})?)?(?:[eE]([-+]?${DIGITS}))?)${SPACE}*$`,
  "u",
);

const ND = /^\p{Nd}$/u;

/** Python's default limit on the digits `int` converts (`sys.int_info.default_max_str_digits`). */
const MAX_STR_DIGITS = 4300;

/**
 * The largest decimal exponent read. Python builds 10**exponent for any exponent (minutes for
 * "1e999999999"); past this one a parameter of at most 4300 digits is 0 or infinity as a double,
 * so the device refuses it rather than hang (the one form Python accepts and this refuses).
 */
const MAX_EXPONENT = 100_000n;

/**
 * Python's `int` of a string of decimal digits and `_`, or `null` past its default limit of 4300
 * digits (`sys.int_info.default_max_str_digits`, which makes `Fraction` raise). Unicode assigns
 * the Nd digits in runs 0 to 9, so a digit's value is its distance from its run's start, modulo 10.
 */
function integer(digits: string): bigint | null {
  let value = 0n;
  let count = 0;
  for (const char of digits) {
    if (char === "_") continue;
    if (++count > MAX_STR_DIGITS) return null;
    const code = char.codePointAt(0) as number;
    let start = code;
    while (ND.test(String.fromCodePoint(start - 1))) start--;
    value = value * 10n + BigInt((code - start) % 10);
  }
  return value;
}

/** Python's `Fraction(text)`, or `null` where it raises (no match, too many digits, a zero denominator). */
function fraction(text: string): Rational | null {
  const match = RATIONAL_FORMAT.exec(text);
  if (match === null) return null;
  const [, sign, num, denom, decimal, exponent] = match;
  const parts = [num ?? "0", denom ?? "1", decimal ?? "", exponent?.replace(/^[-+]/, "") ?? "0"].map(integer);
  const [numerator, denominator, fractional, magnitude] = parts;
  if (numerator == null || denominator == null || fractional == null || magnitude == null) return null;
  if (denominator === 0n || magnitude > MAX_EXPONENT) return null;
  let value = new Rational(numerator, denominator);
  if (decimal !== undefined) {
    const scale = 10n ** BigInt(decimal.replaceAll("_", "").length);
    value = new Rational(numerator * scale + fractional, scale);
  }
  if (exponent !== undefined) {
    const power = 10n ** magnitude;
    value = exponent.startsWith("-") ? value.div(power) : value.mul(power);
  }
  return sign === "-" ? new Rational(-value.num, value.den) : value;
}

/**
 * A task's `dp` (Python: `dp_parameter`): `"none"`, `"laplace:EPSILON"` (each Aggregator's
 * discrete Laplace, epsilon-DP) or `"gaussian:RHO"` (each Aggregator's discrete Gaussian,
 * rho-zCDP), the parameter an exact rational as Python's `Fraction` reads it ("1/8", "0.02",
 * "5e-2"); a `RangeError` naming `field` and the value's type for anything else.
 */
export function dpParameter(dp: unknown, field = "dap.dp"): DpParameter {
  if (dp === "none") return { kind: "none", parameter: null };
  const colon = typeof dp === "string" ? dp.indexOf(":") : -1;
  const kind = typeof dp === "string" ? (colon < 0 ? dp : dp.slice(0, colon)) : "";
  const parameter = typeof dp === "string" && colon >= 0 ? fraction(dp.slice(colon + 1)) : null;
  if ((kind !== "laplace" && kind !== "gaussian") || parameter === null || parameter.num <= 0n) {
    throw new RangeError(`${field} must be ${DP_FORMS}; got ${describe(dp)}`);
  }
  return { kind, parameter };
}
