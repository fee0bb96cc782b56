/**
 * Privacy amplification by shuffling, as the device checks it (Python: `client_sdk.amplification`,
 * docs/math/central-and-shuffle.md).
 *
 * n users each send one report from an epsilon0-LDP randomizer; a shuffler strips who sent what.
 * Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis of
 * privacy amplification by shuffling", FOCS 2021: the shuffled output is a post-processing of one
 * draw from P or Q, where C ~ Bin(n-1, e^-eps0) counts the "clones", A ~ Bin(C, 1/2),
 * Delta ~ Bern(e^eps0/(e^eps0+1)), P = (A + Delta, C - A + 1 - Delta) and
 * Q = (A + 1 - Delta, C - A + Delta). {@link cloneDelta} evaluates the hockey-stick divergence
 * D_{e^eps}(P || Q) and {@link numericalEpsilon} the smallest epsilon whose delta meets a target.
 *
 * The arithmetic is Python's, operation for operation (the same order of floating-point
 * operations, the same continued fraction run in lockstep over the clone counts, CPython's own
 * `math.lgamma`), so the figures agree with Python's to the last bit or within a few ulps where
 * the platforms' exp/log differ by one ulp (JavaScript's Math.exp is not the C library's). A
 * verdict therefore never rests on those last bits: {@link confirmsTarget} accepts only when the
 * figure plus a bound on that difference (`ERROR_ULPS`) meets the target.
 *
 * The policy ({@link PrivacyPolicy.check}, policy.ts) uses it through {@link AMPLIFICATION},
 * registered at import in Node (index.ts) and loaded by the client with a shuffled campaign's
 * document in browsers (a chunk of its own: pages without shuffled campaigns never fetch it).
 */

import { type Amplification, PolicyViolation, type PrivacyClaim, type PrivacyPolicy, type ShufflePlan } from "./policy.js";
import { pythonFloatRepr } from "./config.js";
import { MAX_EPSILON } from "./mechanisms/bounded.js";
import { typeName } from "./mechanisms/fields.js";

const MAX_SAFE_INT = Number.MAX_SAFE_INTEGER;
const TINY = 1e-300;
const SPREAD_SD = 13.0;

/**
 * How far the device's figure may be from Python's, in ulps of the terms it sums. This port and
 * Python's differ where JavaScript's Math.log and Math.exp round differently from the C library's
 * (by one ulp, about one argument in a hundred). One ulp of a log-weight or of a binomial tail's
 * log-front (each about ln Gamma(n) in size, 1.3e7 at n = 10^6) moves that weight or tail by one
 * ulp of ln Gamma(n), relatively; a tail enters the divergence through the coefficients
 * p - e^eps (1-p) and (1-p) - e^eps p; and the arithmetic on the masses rounds as usual. The
 * device adds ERROR_ULPS of each (cloneDeltaWithError); measured against Python
 * (conformance/policy_shuffle.json), the difference stays below a hundredth of that bound.
 */
const ERROR_ULPS = 2 ** 10;

/** A campaign's number as it is (public), any other value by its type. */
function describeNumber(value: unknown): string {
  return typeof value === "number" ? String(value) : `a value of type ${typeName(value)}`;
}

/** `shuffle` of a campaign document validated as Python's `ShufflePlan.from_dict` does (errors name `campaign` when given). */
export function shufflePlan(shuffle: unknown, campaign?: string): ShufflePlan {
  try {
    return checkShufflePlan(shuffle);
  } catch (error) {
    if (campaign === undefined) throw error;
    throw new Error(`campaign ${campaign}: ${(error as Error).message}`);
  }
}

function checkShufflePlan(shuffle: unknown): ShufflePlan {
  if (shuffle === null || typeof shuffle !== "object" || Array.isArray(shuffle)) {
    throw new TypeError(`shuffle must be a JSON object or null; got a value of type ${typeName(shuffle)}`);
  }
  const fields = ["central_epsilon", "delta", "min_batch"];
  const keys = Object.keys(shuffle);
  const missing = fields.filter((f) => !keys.includes(f));
  const unknown = keys.filter((k) => !fields.includes(k)).sort();
  if (missing.length || unknown.length) {
    throw new RangeError(
      `shuffle needs exactly ${JSON.stringify(fields)}; missing ${JSON.stringify(missing)}, unknown ${JSON.stringify(unknown)}`,
    );
  }
  const plan = shuffle as Record<string, unknown>;
  const delta = plan.delta;
  if (typeof delta !== "number" || !(delta > 0 && delta < 1)) {
    throw new RangeError(`shuffle.delta must be a number in (0, 1); got ${describeNumber(delta)}`);
  }
  const minBatch = plan.min_batch;
  if (typeof minBatch !== "number" || !Number.isSafeInteger(minBatch) || minBatch < 2) {
    throw new RangeError(`shuffle.min_batch must be an integer in [2, ${MAX_SAFE_INT}]; got ${describeNumber(minBatch)}`);
  }
  return { min_batch: minBatch, central_epsilon: checkEpsilon(plan.central_epsilon, "shuffle.central_epsilon"), delta };
}

/** An epsilon in (0, 40] (Python: `check_epsilon`). */
export function checkEpsilon(value: unknown, field: string): number {
  if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
    throw new RangeError(`${field} must be a positive finite number; got ${describeNumber(value)}`);
  }
  if (value > MAX_EPSILON) {
    throw new RangeError(
      `${field} must be at most ${MAX_EPSILON}: beyond it the sampler's 2**-64 grid cannot represent the channel's probabilities; got ${value}`,
    );
  }
  return value;
}

// CPython's math.lgamma (Modules/mathmodule.c, m_lgamma): Lanczos' approximation with N = 13,
// g = 6.0247, evaluated as CPython does, so that the log-weights are Python's.
const LANCZOS_G = 6.024680040776729583740234375;
const LANCZOS_NUM = [
  23531376880.410759688572007674451636754734846804940, 42919803642.649098768957899047001988850926355848959,
  35711959237.355668049440185451547166705960488635843, 17921034426.037209699919755754458931112671403265390,
  6039542586.3520280050642916443072979210699388420708, 1439720407.3117216736632230727949123939715485786772,
  248874557.86205415651146038641322942321632125127801, 31426415.585400194380614231628318205362874684987640,
  2876370.6289353724412254090516208496135991145378768, 186056.26539522349504029498971604569928220784236328,
  8071.6720023658162106380029022722506138218516325024, 210.82427775157934587250973392071336271166969580291,
  2.5066282746310002701649081771338373386264310793408,
];
const LANCZOS_DEN = [
  0.0, 39916800.0, 120543840.0, 150917976.0, 105258076.0, 45995730.0, 13339535.0, 2637558.0, 357423.0, 32670.0, 1925.0,
  66.0, 1.0,
];

function lanczosSum(x: number): number {
  let num = 0.0;
  let den = 0.0;
  if (x < 5.0) {
    for (let i = LANCZOS_NUM.length - 1; i >= 0; i--) {
      num = num * x + (LANCZOS_NUM[i] as number);
      den = den * x + (LANCZOS_DEN[i] as number);
    }
  } else {
    for (let i = 0; i < LANCZOS_NUM.length; i++) {
      num = num / x + (LANCZOS_NUM[i] as number);
      den = den / x + (LANCZOS_DEN[i] as number);
    }
  }
  return num / den;
}

/** ln Gamma(x) for x > 0, CPython's `math.lgamma` step for step (the only arguments used here are positive). */
export function lgamma(x: number): number {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? x : Infinity;
  if (x === Math.floor(x) && x <= 2.0) return x <= 0.0 ? Infinity : 0.0;
  if (!(x > 0)) throw new RangeError(`lgamma: only positive arguments are used here; got ${x}`);
  if (x < 1e-20) return -Math.log(x);
  let r = Math.log(lanczosSum(x)) - LANCZOS_G;
  r += (x - 0.5) * (Math.log(x + LANCZOS_G - 0.5) - 1);
  return r;
}

/** The continued fraction of I_x(a, b) (Lentz), elementwise and in lockstep as numpy runs it: every element iterates until all have converged. */
function betaFraction(a: Float64Array, b: Float64Array, x: number): Float64Array {
  const size = a.length;
  const c = new Float64Array(size).fill(1.0);
  const d = new Float64Array(size);
  const h = new Float64Array(size);
  const qab = new Float64Array(size);
  const qap = new Float64Array(size);
  const qam = new Float64Array(size);
  let largest = 1.0; // np.max(qab, initial=1.0)
  for (let i = 0; i < size; i++) {
    const ai = a[i] as number;
    const q = ai + (b[i] as number);
    qab[i] = q;
    qap[i] = ai + 1.0;
    qam[i] = ai - 1.0;
    if (q > largest) largest = q;
    let di = 1.0 - (q * x) / (qap[i] as number);
    di = 1.0 / (Math.abs(di) < TINY ? TINY : di);
    d[i] = di;
    h[i] = di;
  }
  const limit = 50 + 4 * Math.trunc(Math.sqrt(largest));
  const odd = new Float64Array(size);
  const even = new Float64Array(size);
  for (let m = 1; m <= limit; m++) {
    const m2 = 2.0 * m;
    for (let i = 0; i < size; i++) {
      const ai = a[i] as number;
      const bi = b[i] as number;
      odd[i] = ((m * (bi - m)) * x) / (((qam[i] as number) + m2) * (ai + m2));
      even[i] = (-(ai + m) * ((qab[i] as number) + m) * x) / ((ai + m2) * ((qap[i] as number) + m2));
    }
    let converged = true;
    for (let i = 0; i < size; i++) {
      let di = d[i] as number;
      let ci = c[i] as number;
      let hi = h[i] as number;
      let step = 1.0;
      for (const aa of [odd[i] as number, even[i] as number]) {
        di = 1.0 + aa * di;
        di = 1.0 / (Math.abs(di) < TINY ? TINY : di);
        ci = 1.0 + aa / ci;
        ci = Math.abs(ci) < TINY ? TINY : ci;
        step = di * ci;
        hi = hi * step;
      }
      d[i] = di;
      c[i] = ci;
      h[i] = hi;
      if (!(Math.abs(step - 1.0) < 1e-13)) converged = false;
    }
    if (converged) break;
  }
  return h;
}

/** P[Bin(c, 1/2) >= j] elementwise (1 for j <= 0, 0 for j > c), as Python's `_half_tail`. */
function halfTail(j: Float64Array, c: Float64Array): Float64Array {
  const out = new Float64Array(j.length);
  const direct: number[] = [];
  const flip: number[] = [];
  const logFront = new Float64Array(j.length);
  const ln2 = Math.log(2.0);
  for (let i = 0; i < j.length; i++) {
    const ji = j[i] as number;
    const ci = c[i] as number;
    out[i] = ji <= 0 ? 1.0 : 0.0;
    if (!(ji > 0 && ji <= ci)) continue;
    const a = ji;
    const b = ci - ji + 1.0;
    // I_{1/2}(a, b); front = x^a (1-x)^b / (a B(a, b)) at x = 1/2
    logFront[i] = lgamma(a + b) - lgamma(a) - lgamma(b) - (a + b) * ln2;
    ((a + 1.0) / (a + b + 2.0) > 0.5 ? direct : flip).push(i);
  }
  const pick = (indices: number[], first: boolean): Float64Array =>
    Float64Array.from(indices, (i) => {
      const a = j[i] as number;
      const b = (c[i] as number) - a + 1.0;
      return first ? a : b;
    });
  const clip = (v: number): number => Math.min(Math.max(v, 0.0), 1.0);
  if (direct.length) {
    const a = pick(direct, true);
    const fraction = betaFraction(a, pick(direct, false), 0.5);
    direct.forEach((i, k) => {
      out[i] = clip((Math.exp(logFront[i] as number) * (fraction[k] as number)) / (a[k] as number));
    });
  }
  if (flip.length) {
    const b = pick(flip, false);
    const fraction = betaFraction(b, pick(flip, true), 0.5);
    flip.forEach((i, k) => {
      out[i] = clip(1.0 - (Math.exp(logFront[i] as number) * (fraction[k] as number)) / (b[k] as number));
    });
  }
  return out;
}

/** Bernstein's bound on P[X - E X >= deviation] for a sum of independent Bernoullis. */
function bernstein(deviation: number, variance: number): number {
  return Math.min(1.0, Math.exp(-(deviation * deviation) / (2.0 * (variance + deviation / 3.0))));
}

/**
 * D_{e^eps}(P || Q) for the clone pair (P, Q) of n users at epsilon0 (Feldman, McMillan, Talwar,
 * FOCS 2021; Python: `clone_delta`). Given C = c the outcome j = A + Delta has P_c(j) = p B_c(j-1)
 * + (1-p) B_c(j) and Q_c(j) = (1-p) B_c(j-1) + p B_c(j), so P_c > e^eps Q_c exactly above a
 * threshold j*(c) and the divergence is a sum of binomial tails. Clone counts beyond 13 standard
 * deviations are bounded by Bernstein's inequality and counted whole: an upper bound.
 */
export function cloneDelta(epsilon: number, epsilon0: number, n: number): number {
  return cloneDeltaWithError(epsilon, epsilon0, n)[0];
}

/** {@link cloneDelta} and a bound on how far Python's figure may be from it (`ERROR_ULPS`). */
export function cloneDeltaWithError(epsilon: number, epsilon0: number, n: number): [number, number] {
  if (!(epsilon >= 0)) throw new RangeError(`epsilon must be >= 0; got ${describeNumber(epsilon)}`);
  if (epsilon >= epsilon0) return [0.0, 0.0]; // P/Q <= e^eps0 everywhere
  const e = Math.exp(epsilon);
  const e0 = Math.exp(epsilon0);
  const p = e0 / (e0 + 1.0);
  const t = (e * p - (1.0 - p)) / (p - e * (1.0 - p));
  const rate = Math.exp(-epsilon0);
  const trials = n - 1;
  const variance = trials * rate * (1.0 - rate);
  const spread = SPREAD_SD * Math.sqrt(variance) + 20.0;
  const centre = trials * rate;
  const low = Math.max(0, Math.trunc(centre - spread));
  const high = Math.min(trials, Math.ceil(centre + spread));
  const size = high - low + 1;
  const c = new Float64Array(size);
  const weights = new Float64Array(size);
  const logRate = Math.log(rate);
  const log1mRate = Math.log1p(-rate);
  const lgTrials = lgamma(trials + 1.0);
  for (let i = 0; i < size; i++) {
    const ci = low + i;
    c[i] = ci;
    const logWeight = lgTrials - lgamma(ci + 1.0) - lgamma(trials - ci + 1.0) + ci * logRate + (trials - ci) * log1mRate;
    weights[i] = Math.exp(logWeight);
  }
  let omitted = 0.0;
  if (low > 0) omitted += bernstein(centre - (low - 1.0), variance); // P[C <= low - 1]
  if (high < trials) omitted += bernstein(high + 1.0 - centre, variance); // P[C >= high + 1]
  const jStar = new Float64Array(size);
  const jBefore = new Float64Array(size);
  for (let i = 0; i < size; i++) {
    const ci = c[i] as number;
    jStar[i] = Math.min(Math.floor((t * (ci + 1.0)) / (1.0 + t)) + 1.0, ci + 1.0);
    jBefore[i] = (jStar[i] as number) - 1.0;
  }
  const fromPrevious = halfTail(jBefore, c); // P[Bin(c,1/2) >= j* - 1]
  const fromHere = halfTail(jStar, c); // P[Bin(c,1/2) >= j*]
  // The error bound: ERROR_ULPS ulps of ln Gamma(n) in each weight (relative to its term) and in
  // each binomial tail (through the two coefficients the difference gives it), and ERROR_ULPS
  // plain ulps of the arithmetic on the masses.
  const fromBefore = Math.abs(p - e * (1.0 - p));
  const fromTail = Math.abs(1.0 - p - e * p);
  let total = 0.0;
  let tails = 0.0;
  let masses = omitted;
  for (let i = 0; i < size; i++) {
    const before = fromPrevious[i] as number;
    const here = fromHere[i] as number;
    const massP = p * before + (1.0 - p) * here;
    const massQ = (1.0 - p) * before + p * here;
    const weight = weights[i] as number;
    const term = weight * Math.max(massP - e * massQ, 0.0);
    total += term;
    tails += term + weight * (fromBefore * before + fromTail * here);
    masses += weight * (massP + e * massQ);
  }
  const error = ERROR_ULPS * Number.EPSILON * (Math.max(1.0, lgamma(n)) * (tails + omitted) + masses);
  return [Math.min(1.0, total + omitted), error];
}

function checkBound(epsilon0: number, n: number, delta: number): void {
  checkEpsilon(epsilon0, "epsilon0");
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`n must be a positive integer; got ${describeNumber(n)}`);
  if (typeof delta !== "number" || !(delta > 0 && delta < 1)) {
    throw new RangeError(`delta must be a number in (0, 1); got ${describeNumber(delta)}`);
  }
}

/**
 * The smallest epsilon with cloneDelta <= delta, rounded up to within rtol (relative) or atol
 * (absolute), whichever is looser (Python: `numerical_epsilon`, the same bisection on
 * [0, epsilon0], whose returned end always meets the target).
 */
export function numericalEpsilon(epsilon0: number, n: number, delta: number, rtol = 1e-4, atol = 1e-9): number {
  checkBound(epsilon0, n, delta);
  let low = 0.0;
  let high = epsilon0;
  if (cloneDelta(0.0, epsilon0, n) <= delta) return 0.0;
  while (high - low > Math.max(atol, rtol * high)) {
    const middle = 0.5 * (low + high);
    if (cloneDelta(middle, epsilon0, n) <= delta) high = middle;
    else low = middle;
  }
  return high;
}

/**
 * Whether n shuffled epsilon0-LDP reports are (epsilon, delta)-DP by the clone bound, with the
 * device's margin: the figure plus its error bound ({@link cloneDeltaWithError}) is at most delta.
 * So a device never confirms a target that Python (`clone_delta(...) <= delta`) refuses.
 */
export function confirmsTarget(epsilon: number, epsilon0: number, n: number, delta: number): boolean {
  checkBound(epsilon0, n, delta);
  const [figure, error] = cloneDeltaWithError(epsilon, epsilon0, n);
  return figure + error <= delta;
}

/**
 * Python's `format(x, ".<precision>g")` for a finite float (the figure a refusal prints):
 * correctly rounded with ties to even (JavaScript's toExponential breaks exact ties upward),
 * trailing zeros dropped, an exponent below -4 or at least `precision` written as `e+XX`.
 */
export function formatG(x: number, precision: number): string {
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const sign = x < 0 ? "-" : "";
  // 100 significant digits: an exact tie at digit precision + 1 shows as 5 followed by zeros
  // (a double is never within 10^-100, relatively, of a short decimal it does not equal)
  const [long, longExponent] = Math.abs(x).toExponential(99).split("e") as [string, string];
  const all = long.replace(".", "");
  let digits: string;
  let power: number;
  if (all[precision] === "5" && /^0*$/.test(all.slice(precision + 1)) && Number(all[precision - 1]) % 2 === 0) {
    digits = all.slice(0, precision); // a tie, and the kept digit is even: round down
    power = Number(longExponent);
  } else {
    const [mantissa, exponent] = Math.abs(x).toExponential(precision - 1).split("e") as [string, string];
    digits = mantissa.replace(".", "");
    power = Number(exponent);
  }
  const strip = (s: string): string => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (power < -4 || power >= precision) {
    const mantissa = strip(`${digits[0] as string}.${digits.slice(1)}`);
    return `${sign}${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  }
  const body =
    power < 0 ? `0.${"0".repeat(-power - 1)}${digits}` : `${digits.slice(0, power + 1)}.${digits.slice(power + 1)}`;
  return sign + strip(body);
}

/**
 * A local epsilon above `max_epsilon` bought by shuffling (Python: `PrivacyPolicy._check_central`),
 * accepted only when it is within `max_shuffled_epsilon`, the mechanism is pure epsilon-LDP and not
 * memoized (the bound assumes independent reports), the declared target is within
 * `max_central_epsilon` and `max_central_delta`, and the device's own evaluation of the clone
 * bound (Feldman, McMillan, Talwar, FOCS 2021) confirms the target at
 * `min_batch`: the collector's numbers are not trusted.
 */
export function checkShuffled(policy: PrivacyPolicy, campaign: string, claim: PrivacyClaim, shuffle: unknown): void {
  const plan = shufflePlan(shuffle);
  const ceiling = policy.max_central_epsilon;
  if (ceiling === null) throw new PolicyViolation(campaign, "max_epsilon", claim.epsilon, policy.max_epsilon);
  const epsilon = claim.epsilon;
  if (!(epsilon <= policy.max_shuffled_epsilon)) {
    throw new PolicyViolation(campaign, "max_shuffled_epsilon", epsilon, policy.max_shuffled_epsilon);
  }
  if (claim.delta > 0 || claim.epsilonInf !== undefined) {
    throw new PolicyViolation(
      campaign,
      "max_epsilon",
      epsilon,
      policy.max_epsilon,
      "the amplification bound covers independent pure epsilon-LDP reports only",
    );
  }
  if (!(plan.central_epsilon <= ceiling)) {
    throw new PolicyViolation(campaign, "max_central_epsilon", plan.central_epsilon, ceiling);
  }
  if (!(plan.delta <= policy.max_central_delta)) {
    throw new PolicyViolation(campaign, "max_central_delta", plan.delta, policy.max_central_delta);
  }
  if (!confirmsTarget(plan.central_epsilon, epsilon, plan.min_batch, plan.delta)) {
    const bound = numericalEpsilon(epsilon, plan.min_batch, plan.delta);
    throw new PolicyViolation(
      campaign,
      "max_central_epsilon",
      bound,
      ceiling,
      `the campaign claims central_epsilon ${pythonFloatRepr(plan.central_epsilon)} for batches of ` +
        `${plan.min_batch} at local epsilon ${pythonFloatRepr(epsilon)}; the amplification bound gives ` +
        `${formatG(bound, 4)} at delta ${formatG(plan.delta, 6)}`,
    );
  }
}

/** What the policy uses of this module (policy.ts, `registerAmplification`). */
export const AMPLIFICATION: Amplification = { shufflePlan, checkShuffled };
