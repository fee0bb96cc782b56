"""Tests of analysis.postprocess.bootstrap.

- the bootstrap samplers: means within z = 5.5 standard errors, variances within 5.5 relative
  standard errors sqrt(2/(B-1));
- interval coverage: the average over items and 150 repetitions within [0.90, 0.99] for a
  nominal 0.95 (about +-5 standard errors of a binomial average of 0.95 over 1500 draws, which
  are positively correlated, so wider than that).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import estimate
from analysis.postprocess import (
    bootstrap_interval,
    integer_counts,
    mle,
    norm_sub,
    parametric_bootstrap,
    postprocess,
)
from client_sdk.mechanisms.memoized_oracle import Memoized
from tests.analysis.postprocess.common import estimate_of, oracle, zipf_population
from tests.stats import assert_within_z

# ---- the bootstrap -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "sampler"),
    [
        ({"mechanism": "oue", "epsilon": 1.0, "k": 8}, "binomial"),
        ({"mechanism": "grr", "epsilon": 1.0, "k": 8}, "exact"),
        ({"mechanism": "grr", "epsilon": 3.0, "k": 2}, "exact"),
        ({"mechanism": "hr", "epsilon": 2.0, "k": 8}, "simulate"),
        ({"mechanism": "hr", "epsilon": 5.0, "k": 8}, "multinomial"),
        ({"mechanism": "olh", "epsilon": 1.0, "k": 8}, "simulate"),
    ],
)
def test_bootstrap_samplers_draw_the_statistic_law(config: dict[str, object], sampler: str) -> None:
    """Raw estimates from sampled statistics are unbiased with the mechanism's exact variance
    (fixed population), plus the sampling term f(1-f)/n for the i.i.d. multinomial sampler."""
    mechanism = oracle(config)
    k = mechanism.k
    values = zipf_population(k, 1000)
    truth = np.bincount(values, minlength=k) / values.size
    replicates = 600 if sampler == "simulate" else 3000
    result = parametric_bootstrap(
        mechanism,
        mechanism.aggregate(mechanism.perturb(values, rng=np.random.default_rng(0))),
        truth,
        lambda rows, _stats: rows,
        replicates=replicates,
        seed=1,
        sampler=sampler,
    )
    assert result.sampler == sampler
    exact = mechanism.variance(values.size, truth)
    if sampler == "multinomial":
        exact = exact + truth * (1 - truth) / values.size
    mean = result.replicates.mean(axis=0)
    assert_within_z(mean, truth, np.sqrt(exact / replicates), what="bootstrap mean")
    ratio = result.replicates.var(axis=0, ddof=1) / exact
    assert_within_z(ratio, 1.0, math.sqrt(2 / (replicates - 1)), what="bootstrap variance")


def test_bootstrap_auto_sampler_choice_and_seeding() -> None:
    values = zipf_population(6, 300)
    for config, expected in (
        ({"mechanism": "grr", "epsilon": 1.0, "k": 6}, "exact"),
        ({"mechanism": "hr", "epsilon": 1.0, "k": 6}, "simulate"),
        ({"mechanism": "sue", "epsilon": 1.0, "k": 6}, "binomial"),
        ({"mechanism": "ss", "epsilon": 1.0, "k": 6}, "binomial"),
    ):
        est = estimate_of(config, values, 2)
        first = norm_sub(est, replicates=30, seed=7)
        assert f"sampler {expected}" in first.details["intervals"]
        again = norm_sub(est, replicates=30, seed=7)
        np.testing.assert_array_equal(first.ci_low, again.ci_low)
        other = norm_sub(est, replicates=30, seed=8)
        assert not np.array_equal(first.ci_high, other.ci_high)


def test_bias_corrected_interval_moves_up_only() -> None:
    rng = np.random.default_rng(0)
    replicates = rng.normal(size=(4000, 2))
    plain = bootstrap_interval(replicates, np.zeros(2), 0.95, bias_corrected=False)
    np.testing.assert_allclose(plain[0], -1.96, atol=0.1)
    # Replicates centred below the estimate: the interval moves up; above: it does not move.
    up = bootstrap_interval(replicates, np.array([0.5, -0.5]), 0.95, bias_corrected=True)
    assert up[0][0] > plain[0][0] + 0.5 and up[1][0] > plain[1][0] + 0.5
    assert up[0][1] == pytest.approx(plain[0][1]) and up[1][1] == pytest.approx(plain[1][1])


@pytest.mark.parametrize("method", ["norm", "norm-sub", "mle"])
def test_bootstrap_intervals_cover_at_about_the_nominal_rate(method: str) -> None:
    config = {"mechanism": "oue", "epsilon": 1.0, "k": 10}
    mechanism = oracle(config)
    values = zipf_population(10, 2000, exponent=1.2)
    truth = np.bincount(values, minlength=10) / values.size
    rng = np.random.default_rng(77)
    covered = []
    for repetition in range(150):
        est = estimate(mechanism, mechanism.perturb(values, rng=rng))
        result = postprocess(est, method, replicates=100, seed=repetition)
        covered.append((result.ci_low <= truth) & (truth <= result.ci_high))
    coverage = float(np.mean(covered))
    assert 0.90 <= coverage <= 0.99, f"{method}: coverage {coverage:.3f}"


def test_integer_counts_sum_to_n() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        f = rng.dirichlet(np.ones(7))
        n = int(rng.integers(1, 10_000))
        counts = integer_counts(f, n)
        assert counts.sum() == n and np.all(np.abs(counts - f * n) < 1 + 1e-9)


def test_bootstrap_for_hadamard_mle_and_memoized_mechanisms() -> None:
    hr = estimate_of({"mechanism": "hr", "epsilon": 1.0, "k": 16}, zipf_population(16, 1500), 3)
    result = mle(hr, replicates=40)
    assert "warm-started" in result.details["bootstrap_refits"]
    assert np.all(np.isfinite(result.std_errors)) and np.all(result.ci_low <= result.ci_high)
    config = {
        "mechanism": "oue",
        "epsilon": 1.0,
        "k": 6,
        "longitudinal": {"epsilon_permanent": 3.0},
    }
    memoized = oracle(config)
    assert isinstance(memoized, Memoized)
    values = zipf_population(6, 600)
    reports = memoized.perturb_independent_devices(values, rng=np.random.default_rng(1))
    processed = norm_sub(estimate(memoized, reports), replicates=30)
    assert "sampler simulate" in processed.details["intervals"]
    assert np.all(processed.std_errors > 0)
