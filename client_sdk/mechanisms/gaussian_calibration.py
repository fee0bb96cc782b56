"""Calibrating the Gaussian mechanism: the analytic calibration and the textbook one.

Balle & Wang, "Improving the Gaussian mechanism for differential privacy: analytical calibration
and optimal denoising", ICML 2018 (docs/math/numeric.md): adding N(0, sigma^2) to a function of
L2 sensitivity D is (epsilon, delta)-DP **if and only if**

    Phi(D/(2 sigma) - epsilon sigma/D) - e^epsilon Phi(-D/(2 sigma) - epsilon sigma/D) <= delta.

The left side decreases strictly in sigma and in epsilon, so each of sigma, delta and epsilon
follows from the other two: ``analytic_gaussian_delta`` evaluates it, ``analytic_gaussian_sigma``
and ``analytic_gaussian_epsilon`` solve it by bisection to a relative tolerance of 1e-12.

Pure ``math`` (no numpy, no scipy) so that devices and the analysis share one definition. The
normal CDF is evaluated in log space (``log_normal_cdf``): for a tiny delta both terms of the
condition are tiny and nearly equal, and their difference is taken as
``Phi(a) * (1 - exp(epsilon + log Phi(b) - log Phi(a)))`` with ``expm1``, which keeps full
relative precision down to delta around 1e-300.
"""

from __future__ import annotations

import math
from typing import Any

from client_sdk.mechanisms._validation import check_delta, check_epsilon, check_positive

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "log_normal_cdf",
    "normal_cdf",
]

RELATIVE_TOLERANCE = 1e-12
"""Bisections stop when the bracket is narrower than this fraction of its upper end."""

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_MAX_STEPS = 4000


def normal_cdf(x: float) -> float:
    """Phi(x), the standard normal CDF, via ``erfc`` (accurate in both tails)."""
    return 0.5 * math.erfc(-x / _SQRT2)


def log_normal_cdf(x: float) -> float:
    """log Phi(x), to a relative 1e-14 for every finite x.

    ``log1p`` of the upper tail for x > 0 (log Phi(x) is then tiny and ``log`` of a value near 1
    would lose it); ``erfc`` for -20 < x <= 0 (Phi(x) >= 1e-89 is a normal double); below -20
    the asymptotic series of the Mills ratio (Abramowitz & Stegun 26.2.12), whose terms
    (2n-1)!!/x^(2n) fall below 1e-17 within ten terms there.
    """
    if math.isnan(x):
        raise ValueError("log_normal_cdf of nan")
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / _SQRT2))
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x / _SQRT2))
    if math.isinf(x):
        return -math.inf
    inverse_square = 1.0 / (x * x)
    term = 1.0
    series = 1.0
    for n in range(1, 13):
        term *= -(2 * n - 1) * inverse_square
        series += term
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(series)


def analytic_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The smallest delta for which N(0, sigma^2) noise on sensitivity ``sensitivity`` is
    (epsilon, delta)-DP: Phi(D/(2s) - e s/D) - e^e Phi(-D/(2s) - e s/D) (Balle & Wang 2018,
    Theorem 8). ``epsilon`` may be 0."""
    s = check_positive(sigma, "sigma")
    eps = check_epsilon(epsilon, allow_zero=True)
    d = check_positive(sensitivity, "sensitivity")
    a = d / (2.0 * s) - eps * s / d
    b = -d / (2.0 * s) - eps * s / d
    log_a = log_normal_cdf(a)
    exponent = eps + log_normal_cdf(b) - log_a
    if exponent >= 0.0:  # only through rounding: the exact value is non-negative
        return 0.0
    return math.exp(log_a) * -math.expm1(exponent)


def _bisect(predicate_holds_at: Any, low: float, high: float) -> float:
    """Shrink [low, high] (predicate false at low, true at high) to the relative tolerance."""
    for _ in range(_MAX_STEPS):
        if high - low <= RELATIVE_TOLERANCE * high:
            return high
        middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            return high
        if predicate_holds_at(middle):
            high = middle
        else:
            low = middle
    return high


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma (to a relative 1e-12, rounded up) for which N(0, sigma^2) noise on a
    function of L2 sensitivity ``sensitivity`` is (epsilon, delta)-DP (Balle & Wang 2018).

    The bracket is found by doubling and halving from sigma = sensitivity; the bisection keeps
    the condition true at the upper end, which is returned, so the condition holds exactly (as
    evaluated) at the result.
    """
    eps = check_epsilon(epsilon)
    target = check_delta(delta, allow_zero=False)
    d = check_positive(sensitivity, "sensitivity")

    def holds(s: float) -> bool:
        return analytic_gaussian_delta(s, eps, d) <= target

    high = d
    for _ in range(_MAX_STEPS):
        if holds(high):
            break
        high *= 2.0
    else:  # pragma: no cover - delta -> 0 needs sigma -> infinity, but 2**4000 is never reached
        raise ValueError(f"no finite sigma reaches delta={delta!r} at epsilon={epsilon!r}")
    low = high / 2.0
    while holds(low):
        high, low = low, low / 2.0
        if low == 0.0:  # pragma: no cover - delta(sigma) -> 1 as sigma -> 0
            raise ValueError(f"cannot bracket sigma for epsilon={epsilon!r}, delta={delta!r}")
    return _bisect(holds, low, high)


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """The smallest epsilon (to a relative 1e-12, rounded up) that N(0, sigma^2) noise on
    sensitivity ``sensitivity`` gives at ``delta`` (0 when delta is already met at epsilon 0)."""
    s = check_positive(sigma, "sigma")
    target = check_delta(delta, allow_zero=False)
    d = check_positive(sensitivity, "sensitivity")

    def holds(eps: float) -> bool:
        return analytic_gaussian_delta(s, eps, d) <= target

    if holds(0.0):
        return 0.0
    high = 1.0
    for _ in range(_MAX_STEPS):
        if holds(high):
            break
        high *= 2.0
    low = 0.0
    while high > 1.0 and holds(high / 2.0):
        high /= 2.0
    if high > 1.0:
        low = high / 2.0
    return _bisect(holds, low, high)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The textbook sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon (Dwork & Roth 2014,
    Theorem A.1), valid only for epsilon < 1; kept for comparison with the analytic one."""
    eps = check_epsilon(epsilon)
    target = check_delta(delta, allow_zero=False)
    d = check_positive(sensitivity, "sensitivity")
    if eps >= 1.0:
        raise ValueError(
            "the classic Gaussian calibration is valid only for epsilon < 1 (Dwork & Roth 2014, "
            f"Theorem A.1); got epsilon={epsilon!r}; use calibration='analytic'"
        )
    return d * math.sqrt(2.0 * math.log(1.25 / target)) / eps
