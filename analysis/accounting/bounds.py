"""Classical composition bounds, kept beside the exact accounts for comparison.

All are upper bounds on the true epsilon at a given delta; the exact privacy-loss computation of
:class:`~analysis.accounting.PrivacyAccount` is never larger (the tests check
exact <= KOV <= advanced / basic where they apply); see docs/math/accounting.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import special

from analysis.accounting._validation import check_count, check_delta, check_epsilon

# The Renyi orders and the RDP -> (epsilon, delta) conversion are the SDK's (one definition: the
# device converts a zCDP task's guarantee with them, docs/math/dap-noise.md); re-exported here.
from client_sdk.zcdp import DEFAULT_ORDERS as DEFAULT_ORDERS
from client_sdk.zcdp import rdp_to_epsilon as rdp_to_epsilon

FloatArray = npt.NDArray[np.float64]

Claim = tuple[float, float, int]
"""(epsilon, delta, count): ``count`` mechanisms that are each (epsilon, delta)-DP."""


def _check_claims(claims: Sequence[Claim]) -> list[Claim]:
    if not claims:
        raise ValueError("claims must list at least one (epsilon, delta, count)")
    out = []
    for i, (eps, delta, count) in enumerate(claims):
        out.append(
            (
                check_epsilon(eps, f"claims[{i}].epsilon", allow_zero=True),
                check_delta(delta, f"claims[{i}].delta"),
                check_count(count, f"claims[{i}].count"),
            )
        )
    return out


def basic_composition(claims: Sequence[Claim]) -> tuple[float, float]:
    """Basic composition: the epsilons and the deltas add (Dwork, McSherry, Nissim, Smith 2006)."""
    checked = _check_claims(claims)
    return (
        math.fsum(eps * count for eps, _, count in checked),
        min(1.0, math.fsum(delta * count for _, delta, count in checked)),
    )


def advanced_composition_epsilon(claims: Sequence[Claim], delta: float) -> float:
    """Advanced composition (Dwork, Rothblum, Vadhan, FOCS 2010; Dwork & Roth Thm 3.20).

    k mechanisms, each (eps, delta_0)-DP, compose to (eps', k delta_0 + delta')-DP with
    eps' = eps sqrt(2 k ln(1/delta')) + k eps (e^eps - 1). For different epsilons the same
    Azuma argument gives eps' = sqrt(2 ln(1/delta') sum eps_i^2) + sum eps_i (e^eps_i - 1).
    Here delta' = delta - sum delta_0; the result is +inf when that is not positive.
    """
    checked = _check_claims(claims)
    delta = check_delta(delta)
    slack = delta - math.fsum(d * count for _, d, count in checked)
    if slack <= 0:
        return math.inf
    square = math.fsum(eps * eps * count for eps, _, count in checked)
    drift = math.fsum(eps * math.expm1(eps) * count for eps, _, count in checked)
    return math.sqrt(2 * math.log(1 / slack) * square) + drift


def _kov_log_delta_i(epsilon0: float, count: int, i: int) -> float:
    """ln delta_i = ln sum_{l<i} C(k,l)(e^{(k-l)eps} - e^{(k-2i+l)eps}) / (1+e^eps)^k."""
    if i <= 0:
        return -math.inf
    k = count
    ls = np.arange(i, dtype=np.float64)
    log_terms = (
        special.gammaln(k + 1)
        - special.gammaln(ls + 1)
        - special.gammaln(k - ls + 1)
        + (k - ls) * epsilon0
        - k * np.logaddexp(0.0, epsilon0)
        + np.log(-np.expm1((2 * ls - 2 * i) * epsilon0))
    )
    return float(special.logsumexp(log_terms))


def _kov_total(delta0: float, count: int, log_delta_i: float) -> float:
    """1 - (1 - delta_0)^k (1 - delta_i)."""
    if log_delta_i >= 0:
        return 1.0
    log_keep = count * math.log1p(-delta0) + math.log1p(-min(1.0, math.exp(log_delta_i)))
    return -math.expm1(log_keep)


def kov_delta(epsilon0: float, delta0: float, count: int, epsilon: float) -> float:
    """Optimal homogeneous composition (Kairouz, Oh, Viswanath, ICML 2015, Thm 3.3).

    The k-fold composition of (eps_0, delta_0)-DP mechanisms is ((k-2i) eps_0,
    1 - (1-delta_0)^k (1-delta_i))-DP for i = 0..floor(k/2). At an ``epsilon`` between those
    points this returns the delta of the nearest point at or below it (1.0 if there is none).
    For delta_0 = 0 the points are exactly the binary randomized response's hockey-stick curve.
    """
    epsilon0 = check_epsilon(epsilon0, "epsilon0", allow_zero=True)
    delta0 = check_delta(delta0, "delta0")
    count = check_count(count)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    if epsilon0 == 0:
        return -math.expm1(count * math.log1p(-delta0))
    i = max(0, math.ceil((count - epsilon / epsilon0) / 2 - 1e-12))
    if i > count // 2:
        return 1.0
    return _kov_total(delta0, count, _kov_log_delta_i(epsilon0, count, i))


def kov_epsilon(epsilon0: float, delta0: float, count: int, delta: float) -> float:
    """The smallest (k-2i) eps_0 whose KOV delta is at most ``delta`` (+inf if none)."""
    epsilon0 = check_epsilon(epsilon0, "epsilon0", allow_zero=True)
    delta0 = check_delta(delta0, "delta0")
    count = check_count(count)
    delta = check_delta(delta)
    if _kov_total(delta0, count, -math.inf) > delta:
        return math.inf
    # delta_i grows with i: bisect for the largest i that still meets the target.
    lo, hi = 0, count // 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _kov_total(delta0, count, _kov_log_delta_i(epsilon0, count, mid)) <= delta:
            lo = mid
        else:
            hi = mid - 1
    return (count - 2 * lo) * epsilon0
