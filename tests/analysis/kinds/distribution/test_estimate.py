"""EMS on Square Wave reports (Li et al., SIGMOD 2020): quantiles, CDF and histogram of known
populations within their bootstrap intervals, and the estimate through ``analysis.estimation``."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.estimation import DocumentedEstimate, estimate
from analysis.kinds.distribution.estimate import (
    DistributionEstimate,
    ems,
    estimate_distribution,
    smooth,
    to_histogram,
)
from client_sdk.mechanisms.factory import mechanism_from_config
from client_sdk.mechanisms.square_wave import SquareWave


def mechanism(epsilon: float, bins: int) -> SquareWave:
    m = mechanism_from_config(
        {"mechanism": "square_wave", "epsilon": epsilon, "lower": 0.0, "upper": 4.0, "bins": bins}
    )
    assert isinstance(m, SquareWave)
    return m


@pytest.fixture(scope="module")
def fitted() -> tuple[DistributionEstimate, np.ndarray]:
    m = mechanism(2.0, 16)
    rng = np.random.default_rng(11)
    # A smooth density at an n where the sampling error exceeds EMS's smoothing bias (which the
    # bootstrap intervals do not include; at n = 200_000 the 10% quantile falls just outside).
    values = 4.0 * rng.beta(2.0, 2.0, 30_000)
    result = estimate(m, m.perturb(values, rng=rng))
    assert isinstance(result, DistributionEstimate)
    return result, values


def test_quantiles_and_cdf_within_their_intervals(
    fitted: tuple[DistributionEstimate, np.ndarray],
) -> None:
    est, values = fitted
    for q in (0.1, 0.5, 0.9):
        low, high = est.quantile_interval(q)
        truth = float(np.quantile(values, q))
        assert low <= truth <= high, f"q={q}: {truth} outside [{low}, {high}]"
        assert low <= est.quantile(q) <= high
    for x in (1.0, 2.0, 3.0):
        low, high = est.cdf_interval(x)
        truth = float(np.mean(values <= x))
        assert low <= truth <= high, f"F({x}) = {truth} outside [{low}, {high}]"
    assert est.cdf(0.0) == pytest.approx(0.0, abs=1e-3)
    assert est.cdf(4.0) == pytest.approx(1.0)


def test_histogram_is_a_distribution_close_to_the_truth(
    fitted: tuple[DistributionEstimate, np.ndarray],
) -> None:
    est, values = fitted
    assert est.histogram.shape == (16,)
    assert est.histogram.sum() == pytest.approx(1.0)
    assert np.all(est.histogram >= 0)
    truth = np.histogram(values, bins=16, range=(0.0, 4.0))[0] / values.size
    assert np.all(est.histogram_low <= est.histogram_high)
    assert np.abs(est.histogram - truth).sum() < 0.1  # total variation under 0.05
    low, high = est.mean_interval
    assert low <= values.mean() <= high


def test_documented_estimate(fitted: tuple[DistributionEstimate, np.ndarray]) -> None:
    est, _ = fitted
    assert isinstance(est, DocumentedEstimate)
    document = est.to_dict()
    assert document["n"] == 30_000
    assert len(document["histogram"]) == 16
    assert [q["q"] for q in document["quantiles"]] == [0.5, 0.9, 0.99]
    assert "mean" in est.format_table()


def test_grid_mass_on_a_bucket_edge_splits_in_half() -> None:
    theta = np.zeros(9)  # N = 8 steps, 4 buckets of 2 steps
    theta[2] = 1.0  # on the edge of buckets 0 and 1
    assert to_histogram(theta, 4).tolist() == [0.5, 0.5, 0.0, 0.0]
    theta = np.zeros(9)
    theta[8] = 1.0
    assert to_histogram(theta, 4).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_smoothing_keeps_mass_and_em_recovers_a_noiseless_channel() -> None:
    theta = np.array([[0.0, 1.0, 0.0, 0.0]])
    assert smooth(theta).sum() == pytest.approx(1.0)
    m = mechanism(4.0, 8)
    truth = np.linspace(1.0, 2.0, m.steps + 1)
    truth /= truth.sum()
    expected = m.forward(truth) * 1e7  # exact expected counts
    fit, _ = ems(expected, m.forward, m.backward, m.steps + 1, tol=1e-6, smoothing=False)
    assert np.abs(to_histogram(fit, 8) - to_histogram(truth, 8)).max() < 5e-3


def test_bad_quantile_and_zero_reports() -> None:
    m = mechanism(1.0, 8)
    with pytest.raises(ValueError, match="zero reports"):
        estimate(m, m.empty_statistic())
    est = estimate(m, m.perturb(np.full(500, 2.0), rng=np.random.default_rng(0)))
    with pytest.raises(ValueError, match="q must be in"):
        est.quantile(1.5)


@pytest.mark.slow
def test_quantile_intervals_cover_at_their_stated_rate() -> None:
    # 24 seeded populations-and-runs at n = 20,000 on Beta(2, 2) (a density smooth enough that
    # the sampling error, which the bootstrap covers, exceeds EMS's smoothing bias): each 95%
    # quantile interval must cover the truth in at least 0.95 - 5.5 sqrt(0.95 0.05 / 24) = 0.71
    # of runs. Measured with 40 runs and 30 replicates: 0.925, 0.925, 0.875 (q = 0.1, 0.5, 0.9).
    m = mechanism(2.0, 16)
    rng = np.random.default_rng(12)
    values = 4.0 * rng.beta(2.0, 2.0, 20_000)
    quantiles = (0.1, 0.5, 0.9)
    truth = [float(np.quantile(values, q)) for q in quantiles]
    runs = 24
    covered = np.zeros(len(quantiles))
    for run in range(runs):
        est = estimate_distribution(m, m.perturb(values, rng=rng), replicates=20, seed=run)
        for i, q in enumerate(quantiles):
            low, high = est.quantile_interval(q)
            covered[i] += low <= truth[i] <= high
    assert np.all(covered / runs >= 0.71), covered / runs
