"""The Gaussian calibration helpers: published values, the exact condition at its boundary, a
stable normal CDF, and the inverse helpers (Balle & Wang, ICML 2018; docs/math/numeric.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

from client_sdk.mechanisms.gaussian_calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    log_normal_cdf,
    normal_cdf,
)

# sigma / sensitivity at delta = 1e-5 (docs/math/numeric.md, printed to two decimals).
ANALYTIC_TABLE = [(0.1, 30.75), (0.5, 7.03), (1.0, 3.73), (2.0, 1.99), (4.0, 1.08)]
CLASSIC_TABLE = [(0.1, 48.45), (0.5, 9.69)]


@pytest.mark.parametrize(("epsilon", "expected"), ANALYTIC_TABLE)
@pytest.mark.parametrize("sensitivity", [1.0, 2.0, 0.37])
def test_analytic_sigma_matches_the_published_table(
    epsilon: float, expected: float, sensitivity: float
) -> None:
    sigma = analytic_gaussian_sigma(epsilon, 1e-5, sensitivity)
    assert round(sigma / sensitivity, 2) == expected


@pytest.mark.parametrize(("epsilon", "expected"), CLASSIC_TABLE)
def test_classic_sigma_matches_the_published_table(epsilon: float, expected: float) -> None:
    assert round(classic_gaussian_sigma(epsilon, 1e-5, 1.0), 2) == expected
    assert classic_gaussian_sigma(epsilon, 1e-5, 3.0) == pytest.approx(3 * expected, abs=0.02)


@pytest.mark.parametrize("epsilon", [1.0, 1.5, 8.0])
def test_classic_calibration_refuses_epsilon_at_least_one(epsilon: float) -> None:
    with pytest.raises(ValueError, match="epsilon < 1"):
        classic_gaussian_sigma(epsilon, 1e-5, 1.0)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 2.0, 4.0, 10.0, 30.0])
@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-5, 1e-10, 1e-20, 1e-50, 1e-100, 1e-200])
def test_condition_holds_at_sigma_and_fails_just_below(epsilon: float, delta: float) -> None:
    sensitivity = 2.5
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert analytic_gaussian_delta(sigma, epsilon, sensitivity) <= delta
    assert analytic_gaussian_delta(sigma * (1 - 1e-9), epsilon, sensitivity) > delta


def test_classic_sigma_is_valid_and_looser_than_analytic() -> None:
    for epsilon in (0.05, 0.3, 0.9):
        classic = classic_gaussian_sigma(epsilon, 1e-6, 1.0)
        analytic = analytic_gaussian_sigma(epsilon, 1e-6, 1.0)
        assert classic > analytic
        assert analytic_gaussian_delta(classic, epsilon, 1.0) <= 1e-6


def test_delta_matches_scipy_where_both_are_accurate() -> None:
    for sigma in (0.3, 1.0, 3.7, 30.0):
        for epsilon in (0.0, 0.1, 1.0, 3.0):
            a = 1 / (2 * sigma) - epsilon * sigma
            b = -1 / (2 * sigma) - epsilon * sigma
            expected = stats.norm.cdf(a) - math.exp(epsilon) * stats.norm.cdf(b)
            got = analytic_gaussian_delta(sigma, epsilon, 1.0)
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_delta_in_the_far_tail_matches_high_precision_arithmetic() -> None:
    """At delta ~ 1e-200 the two terms of the condition are far below what erfc returns as a
    normal double; the log-space evaluation must still be right to many digits."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    sigma, epsilon = 0.05, 1.0
    a = mpmath.mpf(1) / (2 * sigma) - epsilon * mpmath.mpf(sigma)
    b = -mpmath.mpf(1) / (2 * sigma) - epsilon * mpmath.mpf(sigma)
    exact = mpmath.ncdf(a) - mpmath.e**epsilon * mpmath.ncdf(b)
    got = analytic_gaussian_delta(sigma, epsilon, 1.0)
    assert abs(got / float(exact) - 1) < 1e-12
    sigma = 0.02  # Phi(b) ~ 1e-700: no double can hold it; the difference still comes out
    a = mpmath.mpf(1) / (2 * sigma) - epsilon * mpmath.mpf(sigma)
    b = -mpmath.mpf(1) / (2 * sigma) - epsilon * mpmath.mpf(sigma)
    exact = mpmath.ncdf(a) - mpmath.e**epsilon * mpmath.ncdf(b)
    assert float(exact) == 1.0 or analytic_gaussian_delta(sigma, epsilon, 1.0) == pytest.approx(
        float(exact), rel=1e-12
    )


def test_log_normal_cdf_is_accurate_everywhere() -> None:
    xs = np.concatenate([np.linspace(-3000.0, 8.0, 6001), np.linspace(-21.0, -19.0, 201)])
    ours = np.array([log_normal_cdf(float(x)) for x in xs])
    reference = special.log_ndtr(xs)
    np.testing.assert_allclose(ours, reference, rtol=1e-13)
    assert log_normal_cdf(-math.inf) == -math.inf
    assert normal_cdf(0.0) == 0.5
    assert normal_cdf(-40.0) == pytest.approx(stats.norm.cdf(-40.0), rel=1e-13)


@pytest.mark.parametrize("epsilon", [0.1, 0.7, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_epsilon_inverts_sigma(epsilon: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.3)
    recovered = analytic_gaussian_epsilon(sigma, delta, 1.3)
    assert recovered == pytest.approx(epsilon, rel=1e-9)
    assert analytic_gaussian_delta(sigma, recovered, 1.3) <= delta
    assert analytic_gaussian_delta(sigma, recovered * (1 - 1e-8), 1.3) > delta


def test_epsilon_is_zero_when_delta_is_already_met() -> None:
    # With huge noise even epsilon = 0 meets a loose delta: delta(0) = 2 Phi(D/(2 sigma)) - 1.
    assert analytic_gaussian_epsilon(100.0, 0.5, 1.0) == 0.0


def test_delta_decreases_in_sigma_and_in_epsilon() -> None:
    sigmas = np.geomspace(0.1, 30, 200)  # delta(30) ~ 1e-200 is still a normal double
    deltas = [analytic_gaussian_delta(float(s), 1.0, 1.0) for s in sigmas]
    assert deltas[-1] > 0
    assert np.all(np.diff(deltas) < 0)
    epsilons = np.linspace(0, 5, 200)
    deltas = [analytic_gaussian_delta(2.0, float(e), 1.0) for e in epsilons]
    assert np.all(np.diff(deltas) < 0)


BAD = [0, -1.0, math.inf, math.nan, True, "1", None]


@pytest.mark.parametrize("value", BAD)
def test_bad_arguments_name_the_field(value: Any) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        analytic_gaussian_sigma(value, 1e-5, 1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        analytic_gaussian_sigma(1.0, 1e-5, value)
    with pytest.raises(ValueError, match="sigma"):
        analytic_gaussian_delta(value, 1.0, 1.0)
    with pytest.raises(ValueError, match="sigma"):
        analytic_gaussian_epsilon(value, 1e-5, 1.0)


@pytest.mark.parametrize("delta", [0, 1, 1.5, -1e-9, math.nan, math.inf, True, "0.1"])
def test_delta_outside_the_open_unit_interval_is_refused(delta: Any) -> None:
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_sigma(1.0, delta, 1.0)
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_epsilon(1.0, delta, 1.0)
    with pytest.raises(ValueError, match="delta"):
        classic_gaussian_sigma(0.5, delta, 1.0)
