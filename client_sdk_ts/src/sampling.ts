/**
 * Exact discrete samplers for noise on a grid: the discrete Laplace and the discrete Gaussian
 * (Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020,
 * Algorithms 1-3; Python: client_sdk/sampling.py; docs/protocol.md, "Numbers").
 *
 * Every probability is a ratio of integers and the only randomness is uniform integers drawn
 * from words, so the sampled distribution is exactly the declared one. Each sampler works on a
 * batch of draws in rounds, as Python's vectorized code does: a round serves every draw still
 * pending at once (one word per draw, in the draws' order), and only the draws a round leaves
 * pending enter the next one; so n draws consume the very words Python's n draws consume.
 */
import { Rational } from "./rational.js";
import { randomBits, uniformBelow } from "./samplers.js";
import type { WordSource } from "./words.js";

/** Largest t in a discrete Laplace scale t/s (client_sdk/sampling.py). */
export const MAX_LAPLACE_DENOMINATOR = 1n << 40n;
/** Largest proposal scale t of the discrete Gaussian. */
export const MAX_GAUSSIAN_T = 1 << 24;

/**
 * Bernoulli(exp(-num/den)) for 0 <= num <= den, one draw per entry (CKS 2020, Algorithm 1):
 * K = 1; while Bernoulli(num/(den K)), K += 1; the draw is "K is odd". Rounds over the draws
 * whose K is still growing.
 */
export function bernoulliExpUnit(
  rng: WordSource,
  nums: readonly bigint[],
  dens: readonly bigint[],
): boolean[] {
  const out = new Array<boolean>(nums.length).fill(false);
  const k = new Array<bigint>(nums.length).fill(1n);
  let pending = nums.map((_, i) => i);
  while (pending.length > 0) {
    const drawn = uniformBelow(
      rng,
      pending.map((i) => (dens[i] as bigint) * (k[i] as bigint)),
      pending.length,
    );
    const still: number[] = [];
    pending.forEach((index, j) => {
      if ((drawn[j] as bigint) < (nums[index] as bigint)) {
        still.push(index);
        k[index] = (k[index] as bigint) + 1n;
      } else {
        out[index] = (k[index] as bigint) % 2n === 1n;
      }
    });
    pending = still;
  }
  return out;
}

/**
 * Bernoulli(exp(-num/den)) for num >= 0, den >= 1 (CKS 2020, Algorithm 1): floor(num/den)
 * rounds of Bernoulli(exp(-1)) over the draws still alive, then one Bernoulli(exp(-frac)) batch.
 */
export function bernoulliExp(
  rng: WordSource,
  nums: readonly bigint[],
  dens: readonly bigint[],
): boolean[] {
  const result = new Array<boolean>(nums.length).fill(true);
  const remaining = new Map<number, bigint>();
  nums.forEach((num, i) => {
    const whole = num / (dens[i] as bigint);
    if (whole > 0n) remaining.set(i, whole);
  });
  let pending = [...remaining.keys()];
  while (pending.length > 0) {
    const ones = pending.map(() => 1n);
    const success = bernoulliExpUnit(rng, ones, ones);
    const still: number[] = [];
    pending.forEach((index, j) => {
      const left = remaining.get(index) as bigint;
      if (!success[j]) result[index] = false;
      else if (left > 1n) {
        remaining.set(index, left - 1n);
        still.push(index);
      }
    });
    pending = still;
  }
  const alive = result.flatMap((ok, i) => (ok ? [i] : []));
  const fractions = bernoulliExpUnit(
    rng,
    alive.map((i) => (nums[i] as bigint) % (dens[i] as bigint)),
    alive.map((i) => dens[i] as bigint),
  );
  alive.forEach((index, j) => {
    result[index] = fractions[j] as boolean;
  });
  return result;
}

/** Per draw, the number of Bernoulli(exp(-1)) successes before its first failure (rounds). */
function countExpMinusOneSuccesses(rng: WordSource, size: number): bigint[] {
  const count = new Array<bigint>(size).fill(0n);
  let active = count.map((_, i) => i);
  while (active.length > 0) {
    const ones = active.map(() => 1n);
    const success = bernoulliExpUnit(rng, ones, ones);
    active = active.filter((_, j) => success[j]);
    for (const index of active) count[index] = (count[index] as bigint) + 1n;
  }
  return count;
}

/**
 * `size` draws of the discrete Laplace of scale t/s, P[x] proportional to exp(-|x| s/t)
 * (CKS 2020, Algorithm 2), in rounds: U uniform below t, kept with probability exp(-U/t);
 * V the Bernoulli(exp(-1)) successes; Y = floor((U + tV)/s); a sign bit, (negative, 0) rejected.
 */
export function discreteLaplace(rng: WordSource, t: bigint, s: bigint, size: number): bigint[] {
  const out = new Array<bigint>(size).fill(0n);
  let pending = out.map((_, i) => i);
  while (pending.length > 0) {
    const u = uniformBelow(rng, t, pending.length);
    const keep = bernoulliExpUnit(
      rng,
      u,
      u.map(() => t),
    );
    const candidates = keep.flatMap((ok, j) => (ok ? [j] : []));
    const v = countExpMinusOneSuccesses(rng, candidates.length);
    const negative = randomBits(rng, candidates.length);
    const done = new Set<number>();
    candidates.forEach((j, c) => {
      const y = ((u[j] as bigint) + t * (v[c] as bigint)) / s;
      const minus = negative[c] as boolean;
      if (minus && y === 0n) return;
      out[pending[j] as number] = minus ? -y : y;
      done.add(j);
    });
    pending = pending.filter((_, j) => !done.has(j));
  }
  return out;
}

/**
 * `size` draws of the discrete Gaussian N_Z(0, t m) (CKS 2020, Algorithm 3), in rounds: a
 * discrete Laplace proposal Y of scale t, accepted with probability exp(-(|Y| - m)^2/(2 t m)).
 */
export function discreteGaussian(rng: WordSource, t: bigint, m: bigint, size: number): bigint[] {
  const out = new Array<bigint>(size).fill(0n);
  let pending = out.map((_, i) => i);
  const denominator = 2n * t * m;
  while (pending.length > 0) {
    const y = discreteLaplace(rng, t, 1n, pending.length);
    const gaps = y.map((value) => {
      const gap = (value < 0n ? -value : value) - m;
      return gap * gap;
    });
    const accept = bernoulliExp(
      rng,
      gaps,
      gaps.map(() => denominator),
    );
    pending.forEach((index, j) => {
      if (accept[j]) out[index] = y[j] as bigint;
    });
    pending = pending.filter((_, j) => !accept[j]);
  }
  return out;
}

/**
 * The largest fraction p/q <= `value` with 1 <= q <= `maxDenominator`, from the continued
 * fraction's convergents and semiconvergents (Khinchin, *Continued Fractions*, section 6;
 * client_sdk/sampling.py `floor_fraction`): the Laplace mechanism's rate eps/N rounded down.
 */
export function floorFraction(value: Rational, maxDenominator: bigint): Rational {
  if (maxDenominator < 1n) throw new RangeError("maxDenominator must be at least 1");
  if (value.den <= maxDenominator) return value;
  const floor = value.floor();
  let best = new Rational(floor);
  let [hPrev, kPrev, h, k] = [1n, 0n, floor, 1n];
  let rest = value.sub(floor);
  while (rest.num !== 0n) {
    rest = new Rational(rest.den, rest.num);
    const a = rest.floor();
    rest = rest.sub(a);
    // semiconvergents (h_prev + j h)/(k_prev + j k) for j = 1..a, the last one a convergent
    const room = (maxDenominator - kPrev) / k;
    const jMax = a < room ? a : room;
    if (jMax >= 1n) {
      const candidate = new Rational(hPrev + jMax * h, kPrev + jMax * k);
      if (candidate.cmp(value) <= 0 && candidate.cmp(best) > 0) best = candidate;
    }
    if (kPrev + a * k > maxDenominator) break;
    [hPrev, kPrev, h, k] = [h, k, hPrev + a * h, kPrev + a * k];
    const convergent = new Rational(h, k);
    if (convergent.cmp(value) <= 0 && convergent.cmp(best) > 0) best = convergent;
  }
  return best;
}

/** sigma^2 = t m of a discrete Gaussian, with the Laplace proposal scale t. */
export interface DiscreteGaussianParameters {
  readonly t: bigint;
  readonly m: bigint;
}

/**
 * The discrete Gaussian with the smallest sigma^2 = t m >= `sigma2`, over proposal scales t in
 * [0.75 sigma, sigma + 1] with m/4 - 1 <= t <= 4m + 4; ties to the larger t
 * (client_sdk/sampling.py `DiscreteGaussian.at_least`; CKS 2020, section 5).
 */
export function discreteGaussianAtLeast(sigma2: number): DiscreteGaussianParameters {
  if (!(Number.isFinite(sigma2) && sigma2 > 0)) {
    throw new RangeError(`sigma2 must be a positive finite number, got ${String(sigma2)}`);
  }
  const target = Math.ceil(sigma2); // the ceiling of the double's exact value
  if (target > 2 ** 52) throw new RangeError("sigma2 must stay below 2**52");
  const root = Math.floor(Math.sqrt(target));
  const isqrt = root * root > target ? root - 1 : (root + 1) * (root + 1) <= target ? root + 1 : root;
  const low = Math.max(1, Math.floor((3 * isqrt) / 4) - 2);
  let bestT = 0;
  let bestM = 0;
  let bestExcess = Infinity;
  for (let t = low; t <= isqrt + 1; t++) {
    let m = Math.ceil(target / t);
    while ((m - 1) * t >= target) m -= 1;
    while (m * t < target) m += 1;
    if (!(m <= 4 * t + 4 && t <= 4 * m + 4)) continue;
    const excess = t * m - target;
    if (excess <= bestExcess) {
      bestExcess = excess;
      bestT = t;
      bestM = m;
    }
  }
  return { t: BigInt(bestT), m: BigInt(bestM) };
}
