"""The Gaussian privacy curve, in the Gaussian-DP parametrisation mu = sensitivity / sigma.

A Gaussian mechanism with sensitivity Delta and noise sigma has the privacy loss
L ~ N(mu^2/2, mu^2) under P, and is (eps, delta)-DP iff (Balle & Wang, ICML 2018, Thm 8)

    delta >= Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)  (docs/math/numeric.md)

T Gaussian mechanisms with ratios mu_i compose exactly to one with mu = sqrt(sum mu_i^2)
(Dong, Roth, Su, JRSS-B 2022, Cor. 3.3), whose trade-off function is Phi(Phi^-1(1-alpha) - mu).

The scalar curve and its inverse are the SDK's ``client_sdk.mechanisms.gaussian_calibration``
functions (one definition, shared with the mechanism's calibration), with sigma = 1 and
sensitivity = mu. The vectorized ``gaussian_hockey_stick`` at any *real* argument, needed to
compose a Gaussian with a discrete loss, is the same formula over numpy arrays; the tests check it
against the SDK's function.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

from client_sdk.mechanisms.gaussian_calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
)

FloatArray = npt.NDArray[np.float64]


def gaussian_hockey_stick(mu: float, x: npt.ArrayLike) -> FloatArray:
    """E[(1 - e^{x - L})_+] for L ~ N(mu^2/2, mu^2), at any real ``x`` (vectorized).

    = Phi(mu/2 - x/mu) - e^x Phi(-mu/2 - x/mu), evaluated in log space as
    Phi(a) (1 - e^{b - a}) so that tiny values keep their relative precision.
    """
    xs = np.asarray(x, dtype=np.float64)
    if mu <= 0:
        return -np.expm1(np.minimum(xs, 0.0))
    log_a = special.log_ndtr(mu / 2 - xs / mu)
    log_b = xs + special.log_ndtr(-mu / 2 - xs / mu)
    with np.errstate(invalid="ignore"):
        value = np.exp(log_a) * -np.expm1(np.minimum(log_b - log_a, 0.0))
    return np.where(np.isfinite(value), value, 0.0)


def gaussian_delta(mu: float, epsilon: float) -> float:
    """delta(eps) of a Gaussian mechanism with mu = sensitivity/sigma, for eps >= 0."""
    return analytic_gaussian_delta(1.0, epsilon, mu)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The smallest eps >= 0 with delta(eps) <= ``delta`` (to a relative 1e-12, rounded up)."""
    if delta <= 0:
        return math.inf
    return analytic_gaussian_epsilon(1.0, delta, mu)


def gaussian_beta(mu: float, alpha: npt.ArrayLike) -> FloatArray:
    """The Gaussian trade-off function G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)."""
    a = np.asarray(alpha, dtype=np.float64)
    return np.asarray(special.ndtr(special.ndtri(1 - a) - mu), dtype=np.float64)
