"""Tests of analysis.gap against docs/math/central-and-shuffle.md and by simulation.

Exact checks: the price of locality R/n for OUE against the section 6 table (to the two
decimals printed there), the "users needed" example, the central variances, and sigma/Delta of
the analytic Gaussian against the section 5 table (3.73 at epsilon 1, delta 1e-5). Simulations:
the central mechanisms run on a true histogram have the stated variances (mean squared error
within z = 5.5 standard errors; the standard error of a mean of m squared errors X^2 is
sqrt(Var[X^2]/m), with Var[X^2] = 5 Var[X]^2 for Laplace noise (E X^4 = 24 b^4, Var = 2 b^2)
and 2 Var[X]^2 for normal noise); the LDP error from real perturbed reports matches the exact
fixed-population variance (unary encoding: items independent, errors normal to first order).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import estimate
from analysis.gap import (
    central_gaussian_sigma,
    central_gaussian_variance,
    central_laplace_variance,
    empirical_gap,
    error_curve,
    ldp_variance,
    run_central_gaussian,
    run_central_laplace,
    users_needed,
    utility_gap,
)
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle
from tests.stats import assert_within_z

# docs/math/central-and-shuffle.md, R/n with OUE's V*: epsilon -> (add/remove, replacement).
PRICE_OF_LOCALITY = {0.5: (1.96, 0.49), 1.0: (1.84, 0.46), 2.0: (1.45, 0.36), 4.0: (0.61, 0.15)}


@pytest.mark.parametrize("epsilon", sorted(PRICE_OF_LOCALITY))
def test_price_of_locality_matches_reference_table(epsilon: float) -> None:
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": epsilon, "k": 1000})
    n = 123_457
    add_remove = utility_gap(oue, n, neighbouring="add-remove", shuffle=False)
    replace = utility_gap(oue, n, neighbouring="replace", shuffle=False)
    expected_add, expected_replace = PRICE_OF_LOCALITY[epsilon]
    assert round(add_remove.variance_ratio / n, 2) == expected_add
    assert round(replace.variance_ratio / n, 2) == expected_replace
    v_star = 4 * math.exp(epsilon) / (math.exp(epsilon) - 1) ** 2
    assert add_remove.variance_ratio == pytest.approx(n * epsilon**2 * v_star / 2, rel=1e-12)
    assert replace.variance_ratio == pytest.approx(n * epsilon**2 * v_star / 8, rel=1e-12)


def test_variances_call_the_mechanism_and_the_formulas() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.5, "k": 7})
    assert isinstance(grr, FrequencyOracle)
    assert ldp_variance(grr, 1000) == grr.variance_per_user() / 1000
    assert central_laplace_variance(1.5, 1000) == pytest.approx(8 / (1000**2 * 1.5**2))
    assert central_laplace_variance(1.5, 1000, "add-remove") == pytest.approx(2 / (1000**2 * 2.25))
    sigma = central_gaussian_sigma(1.5, 1e-6, "replace")
    assert central_gaussian_variance(1.5, 1e-6, 1000) == pytest.approx(sigma**2 / 1000**2)
    # Delta_2 = sqrt(2) under replacement: sigma scales linearly with the sensitivity.
    assert sigma == pytest.approx(math.sqrt(2) * central_gaussian_sigma(1.5, 1e-6, "add-remove"))


@pytest.mark.parametrize(("epsilon", "ratio"), [(0.5, 7.03), (1.0, 3.73), (2.0, 1.99), (4.0, 1.08)])
def test_gaussian_baseline_matches_reference_sigma_table(epsilon: float, ratio: float) -> None:
    assert round(central_gaussian_sigma(epsilon, 1e-5, "add-remove"), 2) == ratio


def test_users_needed_reference_example() -> None:
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 100})
    needed = users_needed(oue, 1e-3, neighbouring="add-remove", delta=1e-5)
    assert needed["ldp_users"] == pytest.approx(3.68e6, rel=1e-3)
    assert needed["central_laplace_users"] == pytest.approx(1.4e3, rel=0.02)
    assert needed["ldp_users"] / needed["central_laplace_users"] == pytest.approx(2600, rel=0.01)
    assert needed["central_gaussian_users"] == pytest.approx(3.73e3, rel=1e-3)


def test_users_needed_to_match_are_consistent() -> None:
    olh = mechanism_from_config({"mechanism": "olh", "epsilon": 2.0, "k": 64})
    gap = utility_gap(olh, 50_000, delta=1e-7, shuffle=False).to_dict()
    # The LDP at R n users has the central Laplace error at n users, and vice versa.
    local = gap["ldp_users_for_central_laplace_error"]
    assert ldp_variance(olh, round(local)) == pytest.approx(gap["central_laplace_variance"], 1e-6)
    central = gap["central_laplace_users_for_ldp_error"]
    assert central_laplace_variance(2.0, 1) / central**2 == pytest.approx(gap["ldp_variance"])
    central_g = gap["central_gaussian_users_for_ldp_error"]
    assert central_gaussian_variance(2.0, 1e-7, 1) / central_g**2 == pytest.approx(
        gap["ldp_variance"]
    )


def test_gap_dict_has_the_cli_fields_and_the_shuffle_bound() -> None:
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 2.0, "k": 10})
    out = utility_gap(grr, 10**6, delta=1e-6).to_dict()
    for key in (
        "ldp_variance",
        "central_laplace_variance",
        "central_gaussian_variance",
        "variance_ratio",
        "shuffle_epsilon",
        "shuffle_epsilon_numerical",
    ):
        assert key in out and out[key] is not None
    assert out["shuffle_epsilon"] == pytest.approx(0.0626, abs=5e-4)
    assert out["variance_ratio"] == pytest.approx(
        out["ldp_variance"] / out["central_laplace_variance"]
    )
    small = utility_gap(grr, 1000, delta=1e-6).to_dict()
    assert small["shuffle_epsilon"] is None and "needs epsilon0" in small["shuffle_epsilon_reason"]


def test_refuses_what_it_cannot_compare() -> None:
    laplace = mechanism_from_config(
        {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 1}
    )
    with pytest.raises(ValueError, match="needs a frequency oracle"):
        utility_gap(laplace, 100)
    grr = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 3})
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        utility_gap(grr, 100, neighbouring="swap")
    with pytest.raises(ValueError, match="n must be a positive integer"):
        utility_gap(grr, 0)


def test_error_curve() -> None:
    oue = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 50})
    curve = error_curve(oue, [100, 10_000], delta=1e-6)
    assert curve["ldp"][0] / curve["ldp"][1] == pytest.approx(10.0)  # 1/sqrt(n)
    assert curve["central_laplace"][0] / curve["central_laplace"][1] == pytest.approx(100.0)
    assert curve["central_laplace"][1] ** 2 == pytest.approx(central_laplace_variance(1.0, 10_000))


def test_central_mechanisms_have_their_variance() -> None:
    rng = np.random.default_rng(2024)
    counts = np.array([500.0, 300.0, 150.0, 50.0, 0.0])
    n, epsilon, repetitions = counts.sum(), 0.7, 4000
    truth = counts / n
    for neighbouring in ("replace", "add-remove"):
        laplace = np.array(
            [
                run_central_laplace(counts, epsilon, neighbouring=neighbouring, rng=rng)
                for _ in range(repetitions)
            ]
        )
        variance = central_laplace_variance(epsilon, int(n), neighbouring)
        mse = ((laplace - truth) ** 2).mean()
        # Laplace: Var[X^2] = E X^4 - (E X^2)^2 = 24 b^4 - 4 b^4 = 5 (2 b^2)^2.
        assert_within_z(mse, variance, math.sqrt(5) * variance / math.sqrt(5 * repetitions))
        gaussian = np.array(
            [
                run_central_gaussian(counts, epsilon, 1e-6, neighbouring=neighbouring, rng=rng)
                for _ in range(repetitions)
            ]
        )
        variance = central_gaussian_variance(epsilon, 1e-6, int(n), neighbouring)
        mse = ((gaussian - truth) ** 2).mean()
        assert_within_z(mse, variance, math.sqrt(2) * variance / math.sqrt(5 * repetitions))


def test_empirical_gap_from_real_reports() -> None:
    """The LDP error of perturbed reports and the central errors match their expectations."""
    mechanism = mechanism_from_config({"mechanism": "oue", "epsilon": 1.0, "k": 50})
    rng = np.random.default_rng(7)
    weights = 1 / np.arange(1, 51)
    values = rng.choice(50, size=20_000, p=weights / weights.sum())
    counts = np.bincount(values, minlength=50)
    ldp, central = [], []
    for seed in range(30):
        est = estimate(mechanism, mechanism.perturb(values, rng=np.random.default_rng(seed)))
        gap = empirical_gap(est, counts, rng=seed, repetitions=5)
        ldp.append(gap.ldp_mse)
        central.append(gap.central_laplace_mse)
    # Items are independent for unary encoding: mean of 30 x 50 squared normal errors.
    se_ldp = math.sqrt(2) * gap.ldp_expected / math.sqrt(30 * 50)
    assert_within_z(np.mean(ldp), gap.ldp_expected, se_ldp, what="LDP mse")
    se_central = math.sqrt(5) * gap.central_laplace_expected / math.sqrt(30 * 50 * 5)
    assert_within_z(np.mean(central), gap.central_laplace_expected, se_central, what="central")
    assert gap.to_dict()["expected_ratio"] == pytest.approx(
        gap.ldp_expected / gap.central_laplace_expected
    )
    with pytest.raises(ValueError, match="sum to"):
        empirical_gap(est, counts * 2)
