"""Zero-concentrated DP: the account of the discrete Gaussian (docs/math/dap-noise.md).

A mechanism is rho-zCDP when the Renyi divergence of its outputs on neighbouring inputs is at
most ``alpha * rho`` at every order alpha > 1 (Bun & Steinke, TCC 2016, Def. 1.1); rho adds
under composition (ibid., Lemma 2.3). Adding the discrete Gaussian N_Z(0, sigma^2) to each
coordinate of an integer vector of L2 sensitivity Delta is (Delta^2 / (2 sigma^2))-zCDP
(Canonne, Kamath, Steinke, NeurIPS 2020, Theorem 14).

>>> round(Zcdp(0.5).epsilon_at(1e-6), 4)
5.2215
>>> (Zcdp(0.5) * 4).rho
2.0
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from analysis.accounting._validation import check_count, check_delta, check_epsilon, check_positive
from client_sdk.zcdp import DEFAULT_ORDERS, zcdp_epsilon

__all__ = ["Zcdp"]


@dataclasses.dataclass(frozen=True)
class Zcdp:
    """A rho-zCDP guarantee; ``a + b`` and ``a * n`` compose (rho adds), like
    :class:`~analysis.accounting.PrivacyAccount`, and ``epsilon_at`` / ``delta_at`` convert it."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive(self.rho, "rho"))

    def __add__(self, other: object) -> Zcdp:
        if not isinstance(other, Zcdp):
            return NotImplemented
        return Zcdp(self.rho + other.rho)

    def __mul__(self, count: object) -> Zcdp:
        return Zcdp(self.rho * check_count(count))

    __rmul__ = __mul__

    def epsilon_at(self, delta: float) -> float:
        """The smallest epsilon with (epsilon, delta)-DP found over the Renyi orders:
        eps = alpha rho + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (CKS 2020,
        Corollary 13, solved for epsilon; :func:`client_sdk.zcdp.zcdp_epsilon`, the conversion a
        device's policy applies too)."""
        return zcdp_epsilon(self.rho, check_delta(delta))

    @classmethod
    def at_epsilon(cls, epsilon: float, delta: float) -> Zcdp:
        """The largest rho whose :meth:`epsilon_at` ``delta`` is at most ``epsilon``: the least
        noise a zCDP mechanism needs for (epsilon, delta)-DP by this conversion. Bisection
        (relative 1e-12) from Bun & Steinke's rho, (sqrt(ln(1/delta) + eps) - sqrt(ln(1/delta)))^2,
        which their looser bound eps = rho + 2 sqrt(rho ln(1/delta)) already meets."""
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta, allow_zero=False)
        log_inverse = -math.log(delta)
        low = (math.sqrt(log_inverse + epsilon) - math.sqrt(log_inverse)) ** 2
        high = 2 * epsilon
        while zcdp_epsilon(high, delta) <= epsilon:  # only for a delta near 1
            low, high = high, 2 * high
        while high - low > 1e-12 * low:
            middle = (low + high) / 2
            low, high = (middle, high) if zcdp_epsilon(middle, delta) <= epsilon else (low, middle)
        return cls(low)

    def delta_at(self, epsilon: float) -> float:
        """delta(eps) <= min over alpha of exp((alpha-1)(alpha rho - eps)) / (alpha-1) *
        (1 - 1/alpha)^alpha (CKS 2020, Corollary 13), over the same orders, capped at 1."""
        epsilon = check_epsilon(epsilon, allow_zero=True)
        a = DEFAULT_ORDERS
        log_delta = (a - 1) * (a * self.rho - epsilon) - np.log(a - 1) + a * np.log1p(-1 / a)
        return float(min(1.0, math.exp(float(np.min(log_delta)))))

    def summary(self, delta: float) -> dict[str, Any]:
        """JSON-safe figures: rho and epsilon at ``delta``."""
        epsilon = self.epsilon_at(delta)
        return {
            "rho": self.rho,
            "delta": delta,
            "epsilon": None if math.isinf(epsilon) else epsilon,
        }
