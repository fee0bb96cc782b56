"""Privacy amplification by shuffling, numpy only (the collector calibrates with it; the device
may check a central ceiling with it; the analysis reports with it: :func:`shuffle_bound`,
:func:`credentialed_guarantee`).

n users each send one report from an epsilon0-LDP randomizer; a shuffler strips who sent what.
Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis of
privacy amplification by shuffling", FOCS 2021 (docs/math/central-and-shuffle.md), bound the
central (epsilon, delta) of the shuffled reports against datasets that differ in one user's data:

- **Closed form** (their Theorem 3.1): if epsilon0 <= ln(n / (16 ln(2/delta))), then

      epsilon <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n)
                                                       + 8 e^eps0 / n)).

- **Numerical** (the reduction behind the theorem): the shuffled output is a post-processing of
  one draw from P or Q, where C ~ Bin(n-1, e^-eps0) counts the "clones", A ~ Bin(C, 1/2),
  Delta ~ Bern(e^eps0/(e^eps0+1)), P = (A + Delta, C - A + 1 - Delta) and Q = (A + 1 - Delta,
  C - A + Delta). :func:`clone_delta` evaluates the hockey-stick divergence D_{e^eps}(P || Q)
  by summing binomials; :func:`numerical_epsilon` finds the smallest epsilon whose delta is
  within the target and :func:`calibrate_local_epsilon` the largest epsilon0 whose shuffled
  batch of n reports is (epsilon, delta)-DP. It holds for every n and is never above the closed
  form. :func:`shuffle_bound` gives both bounds; outside the theorem's condition the closed form
  is ``None`` with the reason.

The binomial tails are the regularized incomplete beta function, evaluated by its continued
fraction (Lentz's method), vectorized over the clone counts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_delta, check_epsilon, check_int

__all__ = [
    "ShuffleBound",
    "calibrate_local_epsilon",
    "clone_delta",
    "closed_form_condition",
    "closed_form_epsilon",
    "credentialed_guarantee",
    "numerical_epsilon",
    "shuffle_bound",
]

_FloatArray = npt.NDArray[np.float64]
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_TINY = 1e-300
_SPREAD_SD = 13.0


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


def _beta_fraction(a: _FloatArray, b: _FloatArray, x: float) -> _FloatArray:
    """The continued fraction of I_x(a, b) (Lentz), elementwise; converges for x < (a+1)/(a+b+2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(a)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
    h = d.copy()
    limit = 50 + 4 * int(math.sqrt(float(np.max(qab, initial=1.0))))
    for m in range(1, limit + 1):
        m2 = 2.0 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / np.where(np.abs(d) < _TINY, _TINY, d)
            c = 1.0 + aa / c
            c = np.where(np.abs(c) < _TINY, _TINY, c)
            step = d * c
            h = h * step
        if np.all(np.abs(step - 1.0) < 1e-13):
            break
    return h


def _half_tail(j: _FloatArray, c: _FloatArray) -> _FloatArray:
    """P[Bin(c, 1/2) >= j] elementwise (1 for j <= 0, 0 for j > c)."""
    out = np.where(j <= 0, 1.0, 0.0)
    inside = (j > 0) & (j <= c)
    if np.any(inside):
        a, b = j[inside], c[inside] - j[inside] + 1.0
        # I_{1/2}(a, b); front = x^a (1-x)^b / (a B(a, b)) at x = 1/2.
        log_front = _lgamma(a + b) - _lgamma(a) - _lgamma(b) - (a + b) * math.log(2.0)
        direct = (a + 1.0) / (a + b + 2.0) > 0.5
        value = np.empty_like(a)
        value[direct] = (
            np.exp(log_front[direct]) * _beta_fraction(a[direct], b[direct], 0.5) / a[direct]
        )
        flip = ~direct
        value[flip] = 1.0 - (
            np.exp(log_front[flip]) * _beta_fraction(b[flip], a[flip], 0.5) / b[flip]
        )
        out[inside] = np.clip(value, 0.0, 1.0)
    return out


def _bernstein(deviation: float, variance: float) -> float:
    """Bernstein's bound on P[X - E X >= deviation] for a sum of independent Bernoullis."""
    return min(1.0, math.exp(-(deviation**2) / (2.0 * (variance + deviation / 3.0))))


def clone_delta(epsilon: float, epsilon0: float, n: int) -> float:
    """D_{e^eps}(P || Q) for the clone pair (P, Q) of n users at epsilon0 (module docstring).

    Given C = c, the outcome is j = A + Delta in [0, c+1] with P_c(j) = p B_c(j-1) + (1-p)
    B_c(j) and Q_c(j) = (1-p) B_c(j-1) + p B_c(j), B_c the Bin(c, 1/2) pmf, p =
    e^eps0/(e^eps0+1). Their ratio increases with r = B_c(j-1)/B_c(j) = j/(c+1-j), so
    P_c > e^eps Q_c exactly for j above a threshold j*(c) and the divergence is a sum of
    binomial tails, vectorized over c. The clone counts beyond 13 standard deviations of
    Bin(n-1, e^-eps0) are bounded by Bernstein's inequality and added as if each contributed
    its whole weight, so the result stays an upper bound.
    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0; got {epsilon!r}")
    if epsilon >= epsilon0:
        return 0.0  # P/Q <= e^eps0 everywhere
    e, e0 = math.exp(epsilon), math.exp(epsilon0)
    p = e0 / (e0 + 1.0)
    t = (e * p - (1.0 - p)) / (p - e * (1.0 - p))
    rate = math.exp(-epsilon0)
    trials = n - 1
    variance = trials * rate * (1.0 - rate)
    spread = _SPREAD_SD * math.sqrt(variance) + 20.0
    centre = trials * rate
    low, high = max(0, int(centre - spread)), min(trials, math.ceil(centre + spread))
    c = np.arange(low, high + 1, dtype=np.float64)
    log_weights = (
        math.lgamma(trials + 1.0)
        - _lgamma(c + 1.0)
        - _lgamma(trials - c + 1.0)
        + c * math.log(rate)
        + (trials - c) * math.log1p(-rate)
    )
    weights = np.exp(log_weights)
    omitted = 0.0
    if low > 0:
        omitted += _bernstein(centre - (low - 1.0), variance)  # P[C <= low - 1]
    if high < trials:
        omitted += _bernstein(high + 1.0 - centre, variance)  # P[C >= high + 1]
    j_star = np.minimum(np.floor(t * (c + 1.0) / (1.0 + t)) + 1.0, c + 1.0)
    tail_from_previous = _half_tail(j_star - 1.0, c)  # P[Bin(c,1/2) >= j* - 1]
    tail_from_here = _half_tail(j_star, c)  # P[Bin(c,1/2) >= j*]
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


def calibrate_local_epsilon(
    central_epsilon: float, n: int, delta: float, *, rtol: float = 1e-4, maximum: float = 40.0
) -> float:
    """The largest epsilon0 (to within rtol, rounded down) whose shuffled batch of ``n`` reports
    is (central_epsilon, delta)-DP by the numerical bound: clone_delta(E, epsilon0, n) <= delta.

    The divergence grows with epsilon0, so a binary search on [central_epsilon, maximum]
    (epsilon0 = central_epsilon always qualifies: shuffling never hurts). The returned end of
    the bracket always meets the target.
    """
    central_epsilon, n, delta = _check(central_epsilon, n, delta)
    low, high = central_epsilon, max(central_epsilon, maximum)
    if clone_delta(central_epsilon, high, n) <= delta:
        return high
    while high - low > rtol * low:
        middle = 0.5 * (low + high)
        if clone_delta(central_epsilon, middle, n) <= delta:
            low = middle
        else:
            high = middle
    return low


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


def credentialed_guarantee(
    epsilon0: float,
    batches: Sequence[tuple[int, int | None, int | None]],
    delta: float,
    *,
    adversary_credentials: int = 0,
) -> dict[str, Any] | None:
    """The central guarantee of the batches received, under its stated assumption; ``None``
    before any batch. ``batches``: ``(size, per_credential, uncredentialed)`` each
    (``collector.storage.Storage.batch_credentials``).

    The bound of n shuffled reports holds for a device whose report is shuffled among n - 1
    reports of *other, honest* devices; an adversary's own reports are known to it, so a batch
    holding H honest reports is as private as H shuffled reports (the adversary adds its own
    and shuffles: post-processing). Where the shuffler metered credentials with at most q
    reports of one credential in a batch and none without one, an adversary holding A
    credentials put at most A q reports in it: H >= size - A q. Then the device has at most q
    reports in the batch, and group privacy over them gives (q eps, q e^((q-1) eps) delta)
    (Dwork and Roth, "The algorithmic foundations of differential privacy", 2014, section 2.3;
    their Theorem 2.2 is the pure case). Without credentials nothing bounds H or a device's
    reports in a batch: the figure assumes every report comes from a different honest device,
    and one uploader sending ``size - 1`` reports leaves the next device its local epsilon.
    """
    received = [b for b in batches if b[0] > 0]  # a batch that stored nothing costs nothing
    if not received:
        return None
    adversary = check_int(adversary_credentials, "adversary_credentials", minimum=0)
    sizes = [size for size, _, _ in received]
    metered = all(q is not None and without == 0 for _, q, without in received)
    quota = max(q or 1 for _, q, _ in received) if metered else 1
    honest = min(size - adversary * quota for size in sizes) if metered else min(sizes)
    local = {"epsilon": epsilon0, "delta": 0.0}
    if honest >= 1:
        single = numerical_epsilon(epsilon0, honest, delta)
        epsilon = quota * single
        group_delta = quota * math.exp((quota - 1) * single) * delta
    else:
        epsilon, group_delta = quota * epsilon0, 0.0
    if metered:
        assumption = (
            f"at least {honest} honest reports in every batch: each batch holds at most "
            f"{quota} report(s) of any one device credential and none without one, and an "
            f"adversary holds at most {adversary} credential(s) (--adversary-credentials)"
        )
        per_device = (
            "enforced: at most one report of each credential in a batch (the shuffler's quota)"
            if quota == 1
            else f"composed: up to {quota} reports of one credential in a batch (the shuffler's "
            f"quota), by group privacy over them"
        )
    else:
        assumption = (
            f"every report of a batch from a different honest device ({honest} in the smallest "
            "batch): not enforced, the shuffler took uploads without device credentials, so "
            "anyone may have sent many of them"
        )
        per_device = (
            "not enforced: the shuffler took uploads without credentials; a device with m "
            "reports in one batch has (m epsilon, m e^((m-1) epsilon) delta) by group privacy, "
            "and never more than m times the local epsilon"
        )
    return {
        "epsilon": epsilon,
        "delta": group_delta,
        "local_epsilon": epsilon0,
        "batches": len(sizes),
        "smallest_batch": min(sizes),
        "reports": sum(sizes),
        "honest_reports": max(honest, 0),
        "adversary_credentials": adversary if metered else None,
        "reports_per_device_per_batch": quota if metered else None,
        "assumption": assumption,
        "one_report_per_device": per_device,
        "if_assumption_fails": {
            **local,
            "note": "with fewer honest reports in a batch (an adversary uploading size - 1 of "
            "them), a device keeps only its report's local epsilon",
        },
    }
