"""The numpy clone bound against a scipy evaluation of the same sums, and the calibration
against its definition (Feldman, McMillan, Talwar, FOCS 2021; docs/math/central-and-shuffle.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from client_sdk.amplification import (
    calibrate_local_epsilon,
    clone_delta,
    closed_form_epsilon,
    numerical_epsilon,
)


def _scipy_clone_delta(epsilon: float, epsilon0: float, n: int) -> float:
    """The divergence summed over every clone count with scipy's binomials (no truncation)."""
    e, e0 = math.exp(epsilon), math.exp(epsilon0)
    p = e0 / (e0 + 1.0)
    t = (e * p - (1.0 - p)) / (p - e * (1.0 - p))
    c = np.arange(0, n, dtype=np.float64)
    weights = stats.binom.pmf(c, n - 1, math.exp(-epsilon0))
    j_star = np.minimum(np.floor(t * (c + 1.0) / (1.0 + t)) + 1.0, c + 1.0)
    previous, here = stats.binom.sf(j_star - 2.0, c, 0.5), stats.binom.sf(j_star - 1.0, c, 0.5)
    mass_p = p * previous + (1.0 - p) * here
    mass_q = (1.0 - p) * previous + p * here
    return float(np.dot(weights, np.maximum(mass_p - e * mass_q, 0.0)))


@pytest.mark.parametrize(
    ("epsilon", "epsilon0", "n"),
    [
        (0.05, 2.0, 100_000),
        (0.2, 5.0, 200_000),
        (0.05, 0.5, 1_000),
        (0.5, 8.0, 300_000),
        (0.3, 3.0, 50),
        (1.0, 1.64, 200),
    ],
)
def test_the_numpy_bound_matches_scipy(epsilon: float, epsilon0: float, n: int) -> None:
    ours, reference = clone_delta(epsilon, epsilon0, n), _scipy_clone_delta(epsilon, epsilon0, n)
    # Relative 1e-7 where delta matters; the truncation bound adds at most ~1e-30.
    assert ours >= reference * (1 - 1e-7)
    assert ours <= reference * (1 + 1e-7) + 1e-30


@pytest.mark.parametrize(("target", "n", "delta"), [(1.0, 200, 1e-6), (1.0, 100_000, 1e-6)])
def test_calibration_meets_the_target_and_is_nearly_tight(
    target: float, n: int, delta: float
) -> None:
    epsilon0 = calibrate_local_epsilon(target, n, delta)
    assert clone_delta(target, epsilon0, n) <= delta
    assert clone_delta(target, epsilon0 * (1 + 1e-3), n) > delta
    assert numerical_epsilon(epsilon0, n, delta) <= target * (1 + 1e-4)
    closed, _ = closed_form_epsilon(epsilon0, n, delta)
    assert closed is None or closed >= numerical_epsilon(epsilon0, n, delta)
