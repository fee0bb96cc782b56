"""The numpy clone bound against a scipy evaluation of the same sums, and the calibration
against its definition (Feldman, McMillan, Talwar, FOCS 2021; docs/math/central-and-shuffle.md).

The shuffle bounds, exactly: the closed form against a direct evaluation of Theorem 3.1 written
here, and the docs/math/central-and-shuffle.md values (to the digits printed there); the clone
divergence against a brute-force double sum over (C, A + Delta) with scipy's binomial pmf
(relative 1e-9). The numerical bound is checked to meet its delta, to be tight to its stated
search tolerance, to be at most the closed form, and (a sanity check, not a proof) to agree
within 2% with the Gaussian-DP approximation of the clone pair,
mu = 2 tanh(eps0/2)/sqrt((n-1) e^-eps0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from client_sdk.amplification import (
    calibrate_local_epsilon,
    clone_delta,
    closed_form_condition,
    closed_form_epsilon,
    credentialed_guarantee,
    numerical_epsilon,
    shuffle_bound,
)
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_epsilon


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


def _theorem_3_1(epsilon0: float, n: int, delta: float) -> float:
    e = math.exp(epsilon0)
    return math.log(
        1 + (e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n)
    )


@pytest.mark.parametrize(
    ("epsilon0", "expected", "digits"), [(1, 0.023, 3), (2, 0.063, 3), (4, 0.20, 2), (6, 0.49, 2)]
)
def test_closed_form_matches_reference_values(
    epsilon0: float, expected: float, digits: int
) -> None:
    epsilon, reason = closed_form_epsilon(epsilon0, 10**6, 1e-6)
    assert reason is None and epsilon is not None
    assert round(epsilon, digits) == expected
    assert epsilon == pytest.approx(_theorem_3_1(epsilon0, 10**6, 1e-6), rel=1e-12)


def test_closed_form_condition_is_enforced() -> None:
    n, delta = 10**6, 1e-6
    limit = math.log(n / (16 * math.log(2 / delta)))
    assert closed_form_condition(n, delta) == pytest.approx(limit)
    assert limit == pytest.approx(8.368, abs=1e-3)
    inside, _ = closed_form_epsilon(limit - 1e-9, n, delta)
    assert inside is not None
    outside, reason = closed_form_epsilon(limit + 1e-6, n, delta)
    assert outside is None
    assert reason is not None and "epsilon0 <= ln(n/(16 ln(2/delta)))" in reason
    # Too few users for any epsilon0.
    small = shuffle_bound(0.1, 100, 1e-6)
    assert small.epsilon is None and small.max_epsilon0 < 0
    assert small.to_dict()["shuffle_epsilon"] is None
    assert "Theorem 3.1" in small.to_dict()["shuffle_epsilon_reason"]
    assert 0 < small.numerical_epsilon <= 0.1  # the numerical bound still holds


def _brute_force_delta(epsilon: float, epsilon0: float, n: int) -> float:
    p = math.exp(epsilon0) / (math.exp(epsilon0) + 1)
    total = 0.0
    for c in range(n):
        weight = stats.binom.pmf(c, n - 1, math.exp(-epsilon0))
        for j in range(c + 2):
            before = stats.binom.pmf(j - 1, c, 0.5)
            here = stats.binom.pmf(j, c, 0.5)
            mass_p = p * before + (1 - p) * here  # P(A + Delta = j)
            mass_q = (1 - p) * before + p * here  # Q(A + 1 - Delta = j)
            total += weight * max(0.0, mass_p - math.exp(epsilon) * mass_q)
    return total


@pytest.mark.parametrize(
    ("n", "epsilon0", "epsilon"), [(40, 1.0, 0.3), (150, 2.0, 0.5), (90, 0.5, 0.1), (200, 3.0, 1.0)]
)
def test_clone_delta_matches_brute_force(n: int, epsilon0: float, epsilon: float) -> None:
    assert clone_delta(epsilon, epsilon0, n) == pytest.approx(
        _brute_force_delta(epsilon, epsilon0, n), rel=1e-9
    )


def test_clone_delta_edges() -> None:
    assert clone_delta(2.0, 2.0, 1000) == 0.0
    assert clone_delta(0.5, 1.0, 1000) > clone_delta(0.6, 1.0, 1000)  # decreasing in epsilon
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        clone_delta(-0.1, 1.0, 100)


@pytest.mark.parametrize("epsilon0", [1.0, 2.0, 4.0, 6.0])
def test_numerical_bound_is_tight_and_below_the_closed_form(epsilon0: float) -> None:
    n, delta = 10**6, 1e-6
    bound = shuffle_bound(epsilon0, n, delta)
    assert bound.epsilon is not None
    assert bound.numerical_epsilon <= bound.epsilon
    assert clone_delta(bound.numerical_epsilon, epsilon0, n) <= delta
    assert clone_delta(bound.numerical_epsilon * (1 - 2e-4), epsilon0, n) > delta
    mu = 2 * math.tanh(epsilon0 / 2) / math.sqrt((n - 1) * math.exp(-epsilon0))
    gaussian = analytic_gaussian_epsilon(1 / mu, delta, 1.0)
    assert bound.numerical_epsilon == pytest.approx(gaussian, rel=0.02)


def test_numerical_bound_never_exceeds_epsilon0() -> None:
    assert numerical_epsilon(0.5, 10, 1e-6) <= 0.5
    assert numerical_epsilon(3.0, 2, 1e-9) == pytest.approx(3.0, rel=1e-3)


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="epsilon0"):
        shuffle_bound(0.0, 100, 1e-6)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        shuffle_bound(1.0, 0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        shuffle_bound(1.0, 100, 1.5)


def test_the_credentialed_guarantee_counts_honest_reports_and_composes_over_the_quota() -> None:
    """Issue 21, items 2 and 13: H = size - A q honest reports, the smallest batch binding;
    q > 1 composed by group privacy; without credentials the figure is marked not enforced;
    with no honest report left, the local epsilon."""
    epsilon0, delta = 1.64, 1e-6
    assert credentialed_guarantee(epsilon0, [(0, 1, 0)], delta) is None
    metered = [(250, 1, 0), (200, 1, 0)]
    one = credentialed_guarantee(epsilon0, metered, delta, adversary_credentials=10)
    assert one is not None
    assert one["honest_reports"] == 190 and one["smallest_batch"] == 200
    assert one["epsilon"] == numerical_epsilon(epsilon0, 190, delta) and one["delta"] == delta
    assert one["one_report_per_device"].startswith("enforced")
    assert one["if_assumption_fails"]["epsilon"] == epsilon0
    three = credentialed_guarantee(epsilon0, [(200, 3, 0)], delta, adversary_credentials=10)
    assert three is not None and three["honest_reports"] == 170
    single = numerical_epsilon(epsilon0, 170, delta)
    assert three["epsilon"] == pytest.approx(3 * single, rel=1e-12)
    assert three["delta"] == pytest.approx(3 * math.exp(2 * single) * delta, rel=1e-12)
    assert three["one_report_per_device"].startswith("composed: up to 3")
    flooded = credentialed_guarantee(epsilon0, [(200, 1, 0)], delta, adversary_credentials=200)
    assert flooded is not None and flooded["honest_reports"] == 0
    assert flooded["epsilon"] == epsilon0 and flooded["delta"] == 0.0
    for unmetered in ([(200, None, None)], [(200, 1, 5)]):  # no credentials, or some without
        plain = credentialed_guarantee(epsilon0, unmetered, delta, adversary_credentials=50)
        assert plain is not None and plain["honest_reports"] == 200
        assert plain["epsilon"] == numerical_epsilon(epsilon0, 200, delta)
        assert plain["one_report_per_device"].startswith("not enforced")
        assert "not enforced" in plain["assumption"]
    with pytest.raises(ValueError, match="adversary_credentials"):
        credentialed_guarantee(epsilon0, metered, delta, adversary_credentials=-1)
