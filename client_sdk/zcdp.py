"""Zero-concentrated DP converted to (epsilon, delta)-DP, as the device checks it
(docs/math/dap-noise.md, "The device's ceiling").

A rho-zCDP mechanism has Renyi divergence at most ``alpha * rho`` at every order alpha > 1 (Bun &
Steinke, TCC 2016, Def. 1.1). Its epsilon at a delta is the Renyi conversion of Canonne, Kamath,
Steinke (NeurIPS 2020, Corollary 13; Balle et al., AISTATS 2020), minimised over a fixed grid of
orders: every order gives a valid bound, so the grid only decides how tight it is. This is the
one definition: ``analysis.accounting`` (``rdp_to_epsilon``, ``Zcdp``) uses it, and a device's
``PrivacyPolicy`` holds a ``"gaussian:RHO"`` secure-aggregation task to its central ceiling with
it.

>>> round(zcdp_epsilon(0.5, 1e-6), 4)
5.2215
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_delta, check_positive

__all__ = ["DEFAULT_ORDERS", "rdp_to_epsilon", "zcdp_epsilon"]

DEFAULT_ORDERS: npt.NDArray[np.float64] = np.unique(
    np.concatenate([1 + np.arange(1, 100) / 100, np.geomspace(2, 1e5, 400)])
)
"""Renyi orders for the RDP bound: dense near 1 (large compositions) and geometric above."""


def rdp_to_epsilon(orders: npt.ArrayLike, rdp: npt.ArrayLike, delta: float) -> float:
    """Convert an RDP curve to epsilon at ``delta``, minimised over the orders.

    eps = rdp(alpha) + ln(1 - 1/alpha) - (ln delta + ln alpha)/(alpha - 1) (Balle, Barthe,
    Gaboardi, Hsu, Sato, AISTATS 2020; Canonne, Kamath, Steinke Prop. 12), with the KL shortcut
    eps = 0 when delta >= sqrt(1 - e^{-rdp}) (Bretagnolle-Huber), as in dp_accounting.
    """
    delta = check_delta(delta)
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    if a.shape != r.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"orders and rdp must be 1-D of the same length; got {a.shape}, {r.shape}")
    if np.any(a <= 1):
        raise ValueError(f"orders must be > 1; got {a[a <= 1][0]!r}")
    if delta == 0:
        return 0.0 if np.all(r == 0) else math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        eps = r + np.log1p(-1 / a) - (math.log(delta) + np.log(a)) / (a - 1)
        kl_ok = delta**2 + np.expm1(-r) > 0
    eps = np.where(kl_ok, 0.0, eps)
    eps = np.where(np.isnan(eps), math.inf, eps)
    return float(max(0.0, np.min(eps)))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon of rho-zCDP at ``delta`` (module docstring): the Renyi curve ``alpha rho``
    converted over :data:`DEFAULT_ORDERS`."""
    rho = check_positive(rho, "rho")
    return rdp_to_epsilon(DEFAULT_ORDERS, DEFAULT_ORDERS * rho, delta)
