"""Mean estimation for numeric mechanisms: dispatch, streaming, error bars that cover.

Coverage is checked over R independent campaigns: the fraction of 95% intervals that contain the
truth must be within z = 5 binomial standard errors of 0.95 when every user holds the same value
(the empirical variance is then unbiased for the per-report variance), and at least that (minus
the same tolerance) for a mixed population (where it is conservative). The mean's MSE over the
campaigns must match the exact variance (sum_i Var_i / n^2) within z = 5.5 relative standard
errors sqrt(2/R).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import analysis
from analysis import MeanEstimate, estimate
from analysis.estimation import aggregate, estimate_mean
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.numeric import NumericMechanism
from tests import stats

SCALAR = [
    {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 10.0},
    {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": 0.0, "upper": 10.0},
    {"mechanism": "duchi", "epsilon": 0.5, "lower": 0.0, "upper": 10.0},
    {"mechanism": "piecewise", "epsilon": 2.0, "lower": 0.0, "upper": 10.0},
    {"mechanism": "hybrid", "epsilon": 4.0, "lower": 0.0, "upper": 10.0},
]
VECTOR = [
    {"mechanism": "gaussian", "epsilon": 2.0, "delta": 1e-5, "dim": 3, "clip_norm": 2.0},
    {"mechanism": "hybrid", "epsilon": 6.0, "lower": -1.0, "upper": 1.0, "dim": 4},
    {"mechanism": "duchi", "epsilon": 1.0, "lower": -1.0, "upper": 1.0, "dim": 3},
]


def build(config: dict[str, Any]) -> NumericMechanism:
    m = mechanism_from_config(config)
    assert isinstance(m, NumericMechanism)
    return m


def test_estimate_dispatches_to_the_mean_for_numeric_mechanisms() -> None:
    m = build(SCALAR[0])
    reports = m.perturb(np.full(1000, 4.0), rng=np.random.default_rng(0))
    est = estimate(m, reports)
    assert isinstance(est, MeanEstimate)
    assert analysis.MeanEstimate is MeanEstimate
    assert isinstance(est.mean, float) and isinstance(est.std_errors, float)
    assert isinstance(est.count, int) and est.count == est.n == 1000
    assert est.sum == pytest.approx(1000 * est.mean)
    assert est.ci_low < est.mean < est.ci_high
    assert est.mechanism == m.to_config() and est.variance_method == "empirical"
    v = build(VECTOR[1])
    reports = v.perturb(np.zeros((999, 4)), rng=np.random.default_rng(1))
    est = estimate(v, reports, confidence=0.9)
    assert est.mean.shape == est.std_errors.shape == est.ci_high.shape == (4,)
    assert est.count.sum() == 999 * v.sampled_coordinates  # type: ignore[attr-defined]
    np.testing.assert_allclose(est.sum, 999 * est.mean)
    z90 = 1.6448536269514722
    np.testing.assert_allclose(est.ci_high - est.mean, z90 * est.std_errors)


def test_streaming_over_chunks_equals_one_pass() -> None:
    for config in (SCALAR[3], VECTOR[0]):
        m = build(config)
        shape = (10_000, m.width) if m.value_shape else (10_000,)
        x = np.random.default_rng(2).uniform(0, 1, size=shape)
        reports = m.perturb(x, rng=np.random.default_rng(3))
        whole = estimate(m, reports)
        chunks = estimate(m, (reports[i : i + 777] for i in range(0, len(reports), 777)))
        merged = estimate(m, aggregate(m, reports[:5000]) + aggregate(m, reports[5000:]))
        for other in (chunks, merged):
            assert other.n == whole.n
            np.testing.assert_allclose(other.mean, whole.mean, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(other.std_errors, whole.std_errors, rtol=1e-9)


def test_one_report_uses_the_worst_case_and_zero_reports_are_refused() -> None:
    m = build(SCALAR[2])
    reports = m.perturb(np.array([3.0]), rng=np.random.default_rng(4))
    est = estimate_mean(m, reports)
    assert est.variance_method == "worst_case"
    assert est.std_errors == est.worst_case_std_errors
    assert est.std_errors == pytest.approx(math.sqrt(m.worst_case_variance()[0]))
    with pytest.raises(ValueError, match="zero reports"):
        estimate_mean(m, reports[:0])
    with pytest.raises(ValueError, match="confidence"):
        estimate_mean(m, reports, confidence=1.0)


def test_a_statistic_of_another_mechanism_is_refused() -> None:
    scalar, vector = build(SCALAR[0]), build(VECTOR[0])
    statistic = vector.aggregate(vector.perturb(np.zeros((5, 3)), rng=np.random.default_rng(5)))
    with pytest.raises(ValueError, match="statistic"):
        estimate_mean(scalar, statistic)


def campaigns(
    m: NumericMechanism, population: np.ndarray, repetitions: int, seed: int
) -> list[MeanEstimate]:
    """``repetitions`` independent campaigns over one fixed population, estimated one by one
    through ``estimate`` (the real code path)."""
    n = len(population)
    tiled = np.concatenate([population] * repetitions)
    reports = m.perturb(tiled, rng=np.random.default_rng(seed))
    return [estimate(m, reports[r * n : (r + 1) * n]) for r in range(repetitions)]


def check_coverage(covered: np.ndarray, *, at_least: bool, what: str) -> None:
    rate = float(np.mean(covered))
    se = math.sqrt(0.95 * 0.05 / covered.size)
    assert rate >= 0.95 - 5 * se, f"{what}: coverage {rate:.4f} below 0.95"
    if not at_least:
        assert rate <= 0.95 + 5 * se, f"{what}: coverage {rate:.4f} above 0.95"


REPETITIONS = 3000


@pytest.mark.parametrize("config", SCALAR, ids=lambda c: c["mechanism"])
def test_scalar_intervals_cover_at_the_nominal_rate(config: dict[str, Any]) -> None:
    m = build(config)
    # Every user holds 7.3: the intervals must cover 95% of the time, not more, not less. (250
    # users: near the bounds piecewise outputs are skewed, and the normal interval needs n in
    # the hundreds to reach its nominal level.)
    same = campaigns(m, np.full(250, 7.3), REPETITIONS, seed=10)
    check_coverage(
        np.array([e.ci_low <= 7.3 <= e.ci_high for e in same]), at_least=False, what="equal"
    )
    # A mixed population (some values clipped at 10): at least 95%, and the mean's MSE is the
    # exact variance sum_i Var_i / n^2.
    population = np.linspace(-1.0, 12.0, 250)
    truth = float(np.clip(population, 0.0, 10.0).mean())
    mixed = campaigns(m, population, REPETITIONS, seed=11)
    check_coverage(
        np.array([e.ci_low <= truth <= e.ci_high for e in mixed]), at_least=True, what="mixed"
    )
    errors = np.array([e.mean - truth for e in mixed])
    exact = float(m.variance(population).sum()) / len(population) ** 2
    ratio = float(np.mean(errors**2)) / exact
    stats.assert_within_z(ratio, 1.0, math.sqrt(2 / REPETITIONS), what="MSE / exact variance")


@pytest.mark.parametrize("config", VECTOR, ids=lambda c: c["mechanism"])
def test_vector_intervals_cover_at_the_nominal_rate(config: dict[str, Any]) -> None:
    m = build(config)
    d = m.width
    value = np.linspace(-0.5, 0.5, d) * (0.5 if config["mechanism"] == "gaussian" else 1.0)
    results = campaigns(m, np.tile(value, (60, 1)), 2000, seed=12)
    covered = np.array([(e.ci_low <= value) & (value <= e.ci_high) for e in results])
    for j in range(d):  # each coordinate on its own (coordinates are dependent within a report)
        check_coverage(covered[:, j], at_least=False, what=f"coordinate {j}")
    errors = np.array([e.mean - value for e in results])
    exact = m.variance(value[None, :])[0] / 60
    ratios = np.mean(errors**2, axis=0) / exact
    stats.assert_within_z(ratios, 1.0, math.sqrt(2 / 2000), what="MSE / exact variance")


def test_coverage_check_detects_intervals_that_are_too_narrow() -> None:
    """The coverage test has power: intervals built from 0.85 of the standard error fail."""
    m = build(SCALAR[0])
    results = campaigns(m, np.full(250, 7.3), REPETITIONS, seed=13)
    narrow = np.array([abs(e.mean - 7.3) <= 1.959964 * 0.85 * e.std_errors for e in results])
    with pytest.raises(AssertionError, match="coverage"):
        check_coverage(narrow, at_least=False, what="narrow")
