"""What the same reports guarantee in the shuffle model: privacy amplification by shuffling.

n users each send one report from an epsilon0-LDP randomizer; a shuffler strips who sent what.
Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis of
privacy amplification by shuffling", FOCS 2021 (docs/math/central-and-shuffle.md), bound the
central (epsilon, delta) of the shuffled reports against datasets that differ in one user's data:

- **Closed form** (their Theorem 3.1): if epsilon0 <= ln(n / (16 ln(2/delta))), then

      epsilon <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n)
                                                       + 8 e^eps0 / n)).

  Outside that condition the theorem says nothing, and neither does :func:`closed_form_epsilon`
  (it returns ``None`` with the reason).
- **Numerical** (same paper, the reduction behind the theorem): the shuffled output is a
  post-processing of one draw from P or Q, where C ~ Bin(n-1, e^-eps0) counts the "clones",
  A ~ Bin(C, 1/2), Delta ~ Bern(e^eps0/(e^eps0+1)), P = (A + Delta, C - A + 1 - Delta) and
  Q = (A + 1 - Delta, C - A + Delta). :func:`clone_delta` evaluates the hockey-stick divergence
  D_{e^eps}(P || Q) exactly by summing binomials (it equals D_{e^eps}(Q || P): swapping the two
  coordinates maps P to Q), and :func:`numerical_epsilon` binary-searches the smallest epsilon
  whose delta is within the target. It holds for every n and is never above the closed form.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import stats

from client_sdk.mechanisms._validation import check_delta, check_epsilon, check_int

__all__ = [
    "ShuffleBound",
    "clone_delta",
    "closed_form_condition",
    "closed_form_epsilon",
    "numerical_epsilon",
    "shuffle_bound",
]


def _check(epsilon0: float, n: int, delta: float) -> tuple[float, int, float]:
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    return epsilon0, check_int(n, "n", minimum=1), check_delta(delta, allow_zero=False)


def closed_form_condition(n: int, delta: float) -> float:
    """The largest epsilon0 Theorem 3.1 covers: ln(n / (16 ln(2/delta))) (-inf if none)."""
    ratio = n / (16.0 * math.log(2.0 / delta))
    return math.log(ratio) if ratio > 0 else -math.inf


def closed_form_epsilon(epsilon0: float, n: int, delta: float) -> tuple[float | None, str | None]:
    """Feldman, McMillan, Talwar 2021, Theorem 3.1: (epsilon, None), or (None, the reason)."""
    epsilon0, n, delta = _check(epsilon0, n, delta)
    limit = closed_form_condition(n, delta)
    if epsilon0 > limit:
        return None, (
            f"Theorem 3.1 of Feldman, McMillan, Talwar (FOCS 2021) needs epsilon0 <= "
            f"ln(n/(16 ln(2/delta))) = {limit:.4g} at n={n}, delta={delta:g}; "
            f"epsilon0 = {epsilon0:g} is above it"
        )
    e0 = math.exp(epsilon0)
    inner = 8.0 * math.sqrt(e0 * math.log(4.0 / delta)) / math.sqrt(n) + 8.0 * e0 / n
    return math.log1p((e0 - 1.0) / (e0 + 1.0) * inner), None


def clone_delta(epsilon: float, epsilon0: float, n: int) -> float:
    """D_{e^eps}(P || Q) for the clone pair (P, Q) of n users at epsilon0 (module docstring).

    Given C = c, the outcome is j = A + Delta in [0, c+1] with P_c(j) = p B_c(j-1) + (1-p)
    B_c(j) and Q_c(j) = (1-p) B_c(j-1) + p B_c(j), B_c the Bin(c, 1/2) pmf, p =
    e^eps0/(e^eps0+1). Their ratio increases with r = B_c(j-1)/B_c(j) = j/(c+1-j), so
    P_c > e^eps Q_c exactly for j above a threshold j*(c) and the divergence is a sum of
    binomial tails, vectorized over c. The Bin(n-1, e^-eps0) mass outside the summed range
    (13 standard deviations each side) is added, as if every omitted c contributed its whole
    weight, so the result stays an upper bound.
    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0; got {epsilon!r}")
    if epsilon >= epsilon0:
        return 0.0  # P/Q <= e^eps0 everywhere
    e, e0 = math.exp(epsilon), math.exp(epsilon0)
    p = e0 / (e0 + 1.0)
    # P_c(j) > e^eps Q_c(j)  <=>  r (p - e^eps (1-p)) > e^eps p - (1-p)  <=>  r > t.
    t = (e * p - (1.0 - p)) / (p - e * (1.0 - p))
    clone_rate = math.exp(-epsilon0)
    clones = stats.binom(n - 1, clone_rate)
    # Bin(n-1, e^-eps0) beyond 13 standard deviations has mass far below 1e-30; the omitted mass
    # is computed exactly anyway and added to delta.
    spread = 13.0 * math.sqrt((n - 1) * clone_rate * (1.0 - clone_rate)) + 20.0
    centre = (n - 1) * clone_rate
    low, high = max(0, int(centre - spread)), min(n - 1, math.ceil(centre + spread))
    c = np.arange(low, high + 1, dtype=np.float64)
    weights = clones.pmf(c)
    omitted = float(clones.cdf(low - 1) + clones.sf(high))
    # Smallest j with j/(c+1-j) > t, i.e. j > t(c+1)/(1+t); j = c+1 (r infinite) always counts.
    j_star = np.minimum(np.floor(t * (c + 1.0) / (1.0 + t)) + 1.0, c + 1.0)
    half = stats.binom
    tail_from_previous = half.sf(j_star - 2.0, c, 0.5)  # P[Bin(c,1/2) >= j* - 1]
    tail_from_here = half.sf(j_star - 1.0, c, 0.5)  # P[Bin(c,1/2) >= j*]
    mass_p = p * tail_from_previous + (1.0 - p) * tail_from_here
    mass_q = (1.0 - p) * tail_from_previous + p * tail_from_here
    per_c = np.maximum(mass_p - e * mass_q, 0.0)
    return float(min(1.0, np.dot(weights, per_c) + omitted))


def numerical_epsilon(
    epsilon0: float, n: int, delta: float, *, rtol: float = 1e-4, atol: float = 1e-9
) -> float:
    """The smallest epsilon with clone_delta <= delta, rounded up to within rtol (relative) or
    atol (absolute), whichever is looser.

    Binary search on [0, epsilon0] (the divergence decreases in epsilon; at epsilon0 it is 0, so
    the answer never exceeds the local epsilon0 itself). The returned end of the bracket always
    satisfies the target, so rounding never understates epsilon.
    """
    epsilon0, n, delta = _check(epsilon0, n, delta)
    low, high = 0.0, epsilon0
    if clone_delta(0.0, epsilon0, n) <= delta:
        return 0.0
    while high - low > max(atol, rtol * high):
        middle = 0.5 * (low + high)
        if clone_delta(middle, epsilon0, n) <= delta:
            high = middle
        else:
            low = middle
    return high


@dataclasses.dataclass(frozen=True)
class ShuffleBound:
    """The central guarantee of n shuffled epsilon0-LDP reports at a given delta.

    ``epsilon`` is Theorem 3.1's closed form, ``None`` when its condition fails (``reason`` then
    says why); ``numerical_epsilon`` is the tighter bound from the clone reduction.
    """

    epsilon0: float
    n: int
    delta: float
    epsilon: float | None
    reason: str | None
    numerical_epsilon: float
    max_epsilon0: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "shuffle_epsilon": self.epsilon,
            "shuffle_epsilon_reason": self.reason,
            "shuffle_epsilon_numerical": self.numerical_epsilon,
            "shuffle_delta": self.delta,
            "shuffle_max_epsilon0": self.max_epsilon0 if math.isfinite(self.max_epsilon0) else None,
        }


def shuffle_bound(epsilon0: float, n: int, delta: float) -> ShuffleBound:
    """Both bounds of Feldman, McMillan, Talwar (FOCS 2021) for n reports at epsilon0."""
    epsilon0, n, delta = _check(epsilon0, n, delta)
    epsilon, reason = closed_form_epsilon(epsilon0, n, delta)
    return ShuffleBound(
        epsilon0=epsilon0,
        n=n,
        delta=delta,
        epsilon=epsilon,
        reason=reason,
        numerical_epsilon=numerical_epsilon(epsilon0, n, delta),
        max_epsilon0=closed_form_condition(n, delta),
    )
