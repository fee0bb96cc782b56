"""Exact discrete samplers for noise on a grid: discrete Laplace and discrete Gaussian.

Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020
(docs/math/numeric.md). Every probability is a ratio of integers and the only randomness is
uniform integers from :mod:`client_sdk.randomness` (the OS CSPRNG by default), so the sampled
distribution is exactly the declared one: no floating-point inverse CDF, no Box-Muller, nothing
for the attack of Mironov (CCS 2012) to read in the low bits.

Vectorized: each rejection loop runs in rounds over the array of samples still pending, so the
Python overhead is per round (a few dozen for a million samples), never per sample.

Integer ranges: every intermediate is an int64. Bernoulli(num/den) draws a uniform integer below
``den`` (``den < 2**63``); the algorithms below keep ``den`` under 2**62 for the parameter ranges
their classes accept, and raise ``OverflowError`` instead of returning a wrong sample in the
events (of probability below 1e-30) that would leave that range.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from functools import cached_property

import numpy as np
import numpy.typing as npt

from client_sdk.randomness import RandomSource, random_bits, uniform_below

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "bernoulli_exp",
    "bernoulli_fraction",
    "floor_fraction",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_INT64_LIMIT = (1 << 63) - 1
MAX_LAPLACE_DENOMINATOR = 1 << 40
"""Largest t in a discrete Laplace scale t/s (keeps t*K and u + t*V far below 2**63)."""
MAX_GAUSSIAN_T = 1 << 24
"""Largest proposal scale t of the discrete Gaussian (so sigma^2 = t*m stays below 2**49)."""


def bernoulli_fraction(
    rng: RandomSource | None, numerators: npt.ArrayLike, denominators: npt.ArrayLike
) -> BoolArray:
    """Independent Bernoulli(num/den) draws: a uniform integer below ``den`` is below ``num``.

    ``numerators`` and ``denominators`` are integer arrays of one length (or scalars broadcast
    to it) with ``0 <= num <= den`` and ``1 <= den < 2**63``.
    """
    num, den = np.broadcast_arrays(
        np.asarray(numerators, dtype=np.int64), np.asarray(denominators, dtype=np.int64)
    )
    num = num.reshape(-1)
    den = np.ascontiguousarray(den.reshape(-1))
    if num.size == 0:
        return np.zeros(0, dtype=bool)
    return uniform_below(rng, den, den.size) < num


def _bernoulli_exp_unit(rng: RandomSource | None, num: IntArray, den: IntArray) -> BoolArray:
    """Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS 2020, Algorithm 1, gamma in [0, 1]).

    K = 1; while Bernoulli(gamma/K) succeeds, K += 1; the result is "K is odd". The loop runs
    on the array of draws whose K is still growing; P[K > k] = gamma^k / k!.
    """
    size = num.size
    out = np.empty(size, dtype=bool)
    k = np.ones(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        den_p = den[pending]
        k_p = k[pending]
        if np.any(k_p > _INT64_LIMIT // den_p):  # probability below 1/(2**21)! for den < 2**42
            raise OverflowError("Bernoulli(exp(-gamma)) loop ran past the int64 range")
        success = uniform_below(rng, den_p * k_p, pending.size) < num[pending]
        finished = pending[~success]
        out[finished] = (k[finished] & 1) == 1
        pending = pending[success]
        k[pending] += 1
    return out


def bernoulli_exp(
    rng: RandomSource | None, numerators: npt.ArrayLike, denominators: npt.ArrayLike
) -> BoolArray:
    """Independent Bernoulli(exp(-num/den)) draws for integers num >= 0, den >= 1, exactly.

    CKS 2020, Algorithm 1: for gamma = num/den > 1, floor(gamma) independent Bernoulli(exp(-1))
    draws must all succeed, and then a Bernoulli(exp(-frac(gamma))) draw.
    """
    num, den = np.broadcast_arrays(
        np.asarray(numerators, dtype=np.int64), np.asarray(denominators, dtype=np.int64)
    )
    num = num.reshape(-1)
    den = den.reshape(-1)
    if num.size and (num.min() < 0 or den.min() < 1):
        raise ValueError("bernoulli_exp needs numerators >= 0 and denominators >= 1")
    whole = num // den
    fraction = num - whole * den
    result = np.ones(num.size, dtype=bool)
    pending = np.flatnonzero(whole > 0)
    remaining = whole[pending]
    while pending.size:
        ones = np.ones(pending.size, dtype=np.int64)
        success = _bernoulli_exp_unit(rng, ones, ones)
        result[pending[~success]] = False
        pending = pending[success]
        remaining = remaining[success] - 1
        more = remaining > 0
        pending, remaining = pending[more], remaining[more]
    alive = np.flatnonzero(result)
    result[alive] = _bernoulli_exp_unit(rng, fraction[alive], den[alive])
    return result


def _count_exp_minus_one_successes(rng: RandomSource | None, size: int) -> IntArray:
    """How many Bernoulli(exp(-1)) draws succeed before the first failure, per sample."""
    count = np.zeros(size, dtype=np.int64)
    active = np.arange(size)
    while active.size:
        ones = np.ones(active.size, dtype=np.int64)
        success = _bernoulli_exp_unit(rng, ones, ones)
        active = active[success]
        count[active] += 1
    return count


def floor_fraction(value: Fraction, max_denominator: int) -> Fraction:
    """The largest fraction p/q <= ``value`` with 1 <= q <= ``max_denominator``.

    From the continued fraction of ``value``: the best one-sided approximations are convergents
    and semiconvergents (Khinchin, *Continued Fractions*, section 6). Used to round a noise rate
    epsilon/Delta *down* to a rational with a bounded denominator, so that the implemented epsilon
    never exceeds the configured one and falls short by a relative ~1e-18 or less.
    """
    value = Fraction(value)
    if max_denominator < 1:
        raise ValueError(f"max_denominator must be >= 1; got {max_denominator!r}")
    if value.denominator <= max_denominator:
        return value
    best = Fraction(math.floor(value))
    # Convergents h_i/k_i; each candidate below is <= value by construction or checked.
    h_prev, k_prev, h, k = 1, 0, math.floor(value), 1
    rest = value - math.floor(value)
    while rest:
        rest = 1 / rest
        a = math.floor(rest)
        rest -= a
        # Semiconvergents (h_prev + j h)/(k_prev + j k) for j = 1..a, the last one a convergent.
        j_max = min(a, (max_denominator - k_prev) // k) if k else 0
        if j_max >= 1:
            candidate = Fraction(h_prev + j_max * h, k_prev + j_max * k)
            if candidate <= value and candidate > best:
                best = candidate
        if k_prev + a * k > max_denominator:
            break
        h_prev, k_prev, h, k = h, k, h_prev + a * h, k_prev + a * k
        if Fraction(h, k) <= value and Fraction(h, k) > best:
            best = Fraction(h, k)
    return best


@dataclasses.dataclass(frozen=True)
class DiscreteLaplace:
    """The discrete Laplace (two-sided geometric) distribution on the integers.

    P[x] = (1 - r)/(1 + r) r^|x| with r = exp(-1/scale) and ``scale = t/s`` a positive rational
    (t <= 2**40). Adding it to an integer-valued function of integer sensitivity Delta is
    exactly (Delta/scale)-DP (CKS 2020, section 2.3; the ratio of two shifted pmfs is at most
    r^-Delta).
    """

    scale: Fraction

    def __post_init__(self) -> None:
        scale = Fraction(self.scale)
        if scale <= 0:
            raise ValueError(f"scale must be positive; got {self.scale!r}")
        if scale.numerator > MAX_LAPLACE_DENOMINATOR:
            raise ValueError(
                f"scale must be a fraction t/s with t <= 2**40; got numerator {scale.numerator}"
            )
        object.__setattr__(self, "scale", scale)

    @property
    def ratio(self) -> float:
        """r = exp(-1/scale): P[x+1] / P[x] for x >= 0."""
        return math.exp(-1.0 / float(self.scale))

    def pmf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P[X = x] = (1 - r)/(1 + r) r^|x|, in floating point (for tests and audits)."""
        scale = float(self.scale)
        magnitude = np.abs(np.asarray(x, dtype=np.float64))
        return np.asarray(-math.expm1(-1.0 / scale) / (1 + self.ratio) * np.exp(-magnitude / scale))

    def tail(self, x: int) -> float:
        """P[X >= x] for an integer x >= 1 (equal to P[X <= -x]): r^x / (1 + r)."""
        return math.exp(-x / float(self.scale)) / (1 + self.ratio)

    def magnitude_bound(self, probability: float) -> int:
        """An integer M with P[|X| > M] <= ``probability``, at most one above the smallest.

        P[|X| > M] = 2 r^(M+1)/(1 + r) exactly (twice :meth:`tail`), so M + 1 >=
        scale ln(2/((1 + r) p)) suffices; one more step covers the floating-point rounding.
        """
        if not 0 < probability < 1:
            raise ValueError(f"probability must be in (0, 1); got {probability!r}")
        needed = float(self.scale) * math.log(2 / ((1 + self.ratio) * probability))
        return max(0, math.ceil(needed))

    def variance(self) -> float:
        """Var[X] = 2r/(1-r)^2 = 1/(2 sinh^2(1/(2 scale)))."""
        return 0.5 / math.sinh(0.5 / float(self.scale)) ** 2

    def sample(self, rng: RandomSource | None, size: int) -> IntArray:
        """``size`` independent draws (CKS 2020, Algorithm 2, vectorized over rejection rounds).

        Per round, for every pending sample: U uniform in [0, t), kept with probability
        exp(-U/t); V the number of Bernoulli(exp(-1)) successes; X = U + tV is geometric with
        ratio exp(-1/t); Y = floor(X/s); a sign bit, rejecting (negative, 0) so that 0 is not
        counted twice.
        """
        t, s = self.scale.numerator, self.scale.denominator
        out = np.empty(int(size), dtype=np.int64)
        pending = np.arange(int(size))
        while pending.size:
            u = uniform_below(rng, t, pending.size)
            keep = _bernoulli_exp_unit(rng, u, np.full(pending.size, t, dtype=np.int64))
            candidates = np.flatnonzero(keep)
            v = _count_exp_minus_one_successes(rng, candidates.size)
            if v.size and v.max() > (_INT64_LIMIT - t) // t:
                raise OverflowError("discrete Laplace geometric count ran past the int64 range")
            y = (u[candidates] + t * v) // s
            negative = random_bits(rng, candidates.size)
            accept = ~(negative & (y == 0))
            done = candidates[accept]
            out[pending[done]] = np.where(negative[accept], -y[accept], y[accept])
            finished = np.zeros(pending.size, dtype=bool)
            finished[done] = True
            pending = pending[~finished]
        return out


@dataclasses.dataclass(frozen=True)
class DiscreteGaussian:
    """The discrete Gaussian N_Z(0, sigma^2) with sigma^2 = t*m for integers t, m >= 1.

    P[x] proportional to exp(-x^2/(2 sigma^2)) on the integers (CKS 2020). Writing sigma^2 as a
    multiple of the Laplace proposal scale t keeps the rejection step's exponent
    (|Y| - sigma^2/t)^2/(2 sigma^2) = (|Y| - m)^2/(2tm) a ratio of small integers. Use
    :meth:`at_least` to get the smallest such sigma^2 above a target with t close to sigma.
    """

    t: int
    m: int

    def __post_init__(self) -> None:
        for field in ("t", "m"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{field} must be a positive integer; got {value!r}")
            object.__setattr__(self, field, int(value))
        if self.t > MAX_GAUSSIAN_T or self.m > MAX_GAUSSIAN_T * 4:
            raise ValueError(
                f"sigma^2 = t*m must have t <= 2**24 and m <= 2**26; got t={self.t}, m={self.m}"
            )
        if not self.m <= 4 * self.t + 4 or not self.t <= 4 * self.m + 4:
            # The Laplace proposal of scale t must be within about a factor 2 of sigma, else
            # the rejection step accepts almost nothing (CKS 2020, section 5.3).
            raise ValueError(
                f"t must be within a factor of about 2 of sigma = sqrt(t*m), i.e. m/4 <= t <= 4m; "
                f"got t={self.t}, m={self.m}"
            )

    @classmethod
    def at_least(cls, sigma2: float) -> DiscreteGaussian:
        """The discrete Gaussian with the smallest sigma^2 = t*m >= ``sigma2``, searching the
        proposal scales t in [0.75 sigma, sigma + 1] (t near sigma keeps the rejection rate low,
        CKS 2020 section 5). Near t = sigma, ceil(sigma2/t) t - sigma2 barely changes with t;
        over the whole window it takes values spread over [0, t), so the best one exceeds the
        target by a relative 1e-12 or so once sigma is large; ties go to the larger t."""
        if not (math.isfinite(sigma2) and sigma2 > 0):
            raise ValueError(f"sigma2 must be a positive finite number; got {sigma2!r}")
        target = math.ceil(Fraction(sigma2))
        root = math.isqrt(target)
        low = max(1, (3 * root) // 4 - 2)
        t = np.arange(low, root + 2, dtype=np.int64)
        m = -(-target // t)  # ceil(target / t)
        allowed = (m <= 4 * t + 4) & (t <= 4 * m + 4)
        excess = np.where(allowed, t * m - target, np.iinfo(np.int64).max)
        best = int(np.flatnonzero(excess == excess.min())[-1])
        return cls(int(t[best]), int(m[best]))

    @property
    def sigma2(self) -> int:
        """The parameter sigma^2 = t*m (the variance is slightly below it for small sigma)."""
        return self.t * self.m

    @cached_property
    def _log_normalizer(self) -> float:
        # Poisson summation: sum_x exp(-x^2/(2 s2)) = sqrt(2 pi s2) sum_k exp(-2 pi^2 s2 k^2).
        s2 = float(self.sigma2)
        theta = sum(math.exp(-2 * math.pi**2 * s2 * k * k) for k in range(1, 6))
        return 0.5 * math.log(2 * math.pi * s2) + math.log1p(2 * theta)

    def magnitude_bound(self, probability: float) -> int:
        """An integer M with P[|X| > M] <= ``probability``.

        The discrete Gaussian is sigma^2-subgaussian, E[e^(tX)] <= e^(t^2 sigma^2/2) (shown by
        Canonne, Kamath and Steinke 2020), so by Chernoff P[X >= m] <= exp(-m^2/(2 sigma^2))
        and P[|X| > M] <= 2 exp(-(M+1)^2/(2 sigma^2)); M + 1 = sigma sqrt(2 ln(2/p)) suffices
        (about 9.5 sigma at p = 2**-64; tests/security/test_poisoning.py sums the exact tail).
        """
        if not 0 < probability < 1:
            raise ValueError(f"probability must be in (0, 1); got {probability!r}")
        needed = math.sqrt(2.0 * self.sigma2 * math.log(2 / probability))
        return max(0, math.ceil(needed))

    def pmf(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """P[X = x], in floating point (for tests and audits, not for sampling)."""
        xs = np.asarray(x, dtype=np.float64)
        return np.asarray(np.exp(-(xs * xs) / (2.0 * self.sigma2) - self._log_normalizer))

    def variance(self) -> float:
        """Var[X] = sigma^2 sum_k (1 - 4 pi^2 sigma^2 k^2) q^(k^2) / sum_k q^(k^2) with
        q = exp(-2 pi^2 sigma^2) (Poisson summation; below sigma^2 by a relative 1e-7 at sigma=1
        and by nothing a double can show once sigma >= 3)."""
        s2 = float(self.sigma2)
        c = 2 * math.pi**2 * s2
        num = 1.0 + 2 * sum((1 - 2 * c * k * k) * math.exp(-c * k * k) for k in range(1, 6))
        den = 1.0 + 2 * sum(math.exp(-c * k * k) for k in range(1, 6))
        return s2 * num / den

    def sample(self, rng: RandomSource | None, size: int) -> IntArray:
        """``size`` independent draws (CKS 2020, Algorithm 3, vectorized over rejection rounds).

        Propose Y from the discrete Laplace of scale t; accept with probability
        exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)) = exp(-(|Y| - m)^2 / (2tm)).
        """
        proposal = DiscreteLaplace(Fraction(self.t))
        denominator = 2 * self.t * self.m
        out = np.empty(int(size), dtype=np.int64)
        pending = np.arange(int(size))
        while pending.size:
            y = proposal.sample(rng, pending.size)
            gap = np.abs(y) - self.m
            if np.any(np.abs(gap) > 3_000_000_000):  # |Y| > 178 t: probability below e^-178
                raise OverflowError("discrete Gaussian proposal ran past the int64 range")
            accept = bernoulli_exp(rng, gap * gap, np.full(y.size, denominator, dtype=np.int64))
            out[pending[accept]] = y[accept]
            pending = pending[~accept]
        return out
