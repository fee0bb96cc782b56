"""The aggregators' noise over many collections, through the real aggregation code (upload,
aggregation job, collection job, aggregate shares, the Collector's decoding) with in-process
aggregators and seeded noise sources: the residuals follow the stated distribution (chi-square),
the stated standard errors cover at 93-97 %, and one aggregator's noise alone hides one report
at the stated epsilon (an empirical privacy check). ``test_noise.py`` runs real processes."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from analysis.accounting import Zcdp
from client_sdk.dap.messages import Interval
from client_sdk.sampling import DiscreteGaussian, DiscreteLaplace
from collector.dap.task import TaskSpec
from tests.collector.dap.inprocess import TIME_PRECISION, InProcessPair

LENGTH = 20
COLLECTIONS = 100  # x LENGTH coordinates = 2000 residuals
HISTOGRAM = {"type": "histogram", "length": LENGTH, "chunk_length": 4}


def residuals(tmp: Path, dp: str, seed: int) -> tuple[np.ndarray, np.ndarray, InProcessPair]:
    """``COLLECTIONS`` one-report batches (one time unit each) collected one by one: the
    estimate minus the truth per coordinate, and the standard errors the Collector stated."""
    pair = InProcessPair(
        tmp,
        HISTOGRAM,
        dp=dp,
        leader_rng=np.random.default_rng([seed, 1]),
        helper_rng=np.random.default_rng([seed, 2]),
    )
    start = pair.unit() - COLLECTIONS
    truth = [i % LENGTH for i in range(COLLECTIONS)]
    reports = []
    for i, bucket in enumerate(truth):
        reports += pair.reports([bucket], at=(start + i) * TIME_PRECISION)
    assert pair.upload(reports).status == ()
    assert pair.drive()["aggregated"] == COLLECTIONS
    out, errors = [], []
    for i, bucket in enumerate(truth):
        result = pair.collect(Interval(start + i, 1))
        assert result["report_count"] == 1
        expected = np.zeros(LENGTH, dtype=np.int64)
        expected[bucket] = 1
        out.append(np.asarray(result["estimate"]) - expected)
        errors.append(result["std_errors"])
    assert result["privacy"]["per_collection"] is not None
    pair.close()
    return np.concatenate(out), np.concatenate(errors), pair


def two_draws_pmf(noise: DiscreteLaplace | DiscreteGaussian, support: int) -> np.ndarray:
    """P[X + Y = k] for k in [-support, support], X and Y independent copies of ``noise``."""
    one = noise.pmf(np.arange(-support, support + 1))
    return np.convolve(one, one)[support : 3 * support + 1]


def chi_square_p(r: np.ndarray, pmf: np.ndarray, support: int, edges: list[int]) -> float:
    """Goodness of fit of ``r`` to ``pmf`` over the bins cut at ``edges`` (and the two tails)."""
    ks = np.arange(-support, support + 1)
    cuts = [-math.inf, *edges, math.inf]
    observed = [np.sum((r >= lo) & (r < hi)) for lo, hi in itertools.pairwise(cuts)]
    expected = [pmf[(ks >= lo) & (ks < hi)].sum() for lo, hi in itertools.pairwise(cuts)]
    counts = np.asarray(expected) * len(r)
    assert counts.min() >= 5, counts  # the chi-square approximation's usual condition
    return float(stats.chisquare(observed, counts * (len(r) / counts.sum())).pvalue)


@pytest.mark.parametrize(
    ("dp", "seed"), [("laplace:1/4", 2611), ("gaussian:1/200", 2612)], ids=["laplace", "gaussian"]
)
def test_residuals_follow_the_stated_noise_and_standard_errors_cover(
    tmp_path: Path, dp: str, seed: int
) -> None:
    r, std_errors, pair = residuals(tmp_path, dp, seed)
    noise = pair.spec.noise()
    assert noise is not None
    sd = math.sqrt(2 * noise.variance())
    assert np.all(std_errors == sd)
    assert 10 < sd < 30  # scale where a 95 % interval is not dominated by the integer lattice
    # 1. Goodness of fit to the sum of two independent draws: chi-square over 12 bins.
    support = int(12 * sd)
    pmf = two_draws_pmf(noise, support)
    edges = [round(q * sd) for q in (-1.6, -1.0, -0.6, -0.3, -0.1, 0.1, 0.3, 0.6, 1.0, 1.6)]
    edges = sorted({*edges, 0})
    assert chi_square_p(r, pmf, support, edges) > 1e-3
    # 2. Coverage of estimate +- 1.96 standard errors: the exact probability from the pmf
    # lies in [93 %, 97 %], and so does the observed share (2000 residuals: its standard
    # error is 0.5 %, so the window is 4 of them around 95 %).
    ks = np.arange(-support, support + 1)
    exact = pmf[np.abs(ks) <= 1.96 * sd].sum()
    observed = np.mean(np.abs(r) <= 1.96 * std_errors)
    assert 0.93 <= exact <= 0.97, exact
    assert 0.93 <= observed <= 0.97, observed
    # ... and it can fail: had one aggregator's variance been stated (the factor 2 forgotten),
    # the same residuals would be covered well below 93 %.
    assert np.mean(np.abs(r) <= 1.96 * std_errors / math.sqrt(2)) < 0.90
    # 3. Unbiased: the mean residual is within 4 standard errors of 0.
    assert abs(r.mean()) <= 4 * sd / math.sqrt(len(r))


# -- the empirical privacy check


def one_aggregator_outputs(spec: TaskSpec, value: int, draws: int, seed: int) -> np.ndarray:
    """What the Collector and a corrupt Helper see of the batch sum ``value``: the Helper
    knows its own draw, so only the honest Leader's noise remains (``TaskSpec.add_noise``,
    what ``_seal_share`` adds), ``draws`` times independently, decoded as signed integers."""
    p = spec.build_vdaf().field.MODULUS
    noisy = spec.add_noise([value] * draws, p, np.random.default_rng(seed))
    return np.asarray([x - p if x > p // 2 else x for x in noisy], dtype=np.int64)


def largest_certified_loss(a: np.ndarray, b: np.ndarray, delta: float, alpha: float) -> float:
    """The largest privacy loss the samples prove, at confidence 1 - ``alpha`` jointly: over
    the events {X >= k}, ln((lower bound of P_a - delta) / upper bound of P_b), with
    Clopper-Pearson bounds at alpha / (2 * events) each (Bonferroni)."""
    lo, hi = int(min(a.min(), b.min())), int(max(a.max(), b.max()))
    ks = range(lo + 1, hi)
    level = alpha / (2 * len(ks))
    best = -math.inf
    for k in ks:
        hits_a, hits_b = int(np.sum(a >= k)), int(np.sum(b >= k))
        lower_a = stats.beta.ppf(level, hits_a, len(a) - hits_a + 1) if hits_a else 0.0
        upper_b = stats.beta.ppf(1 - level, hits_b + 1, len(b) - hits_b) if hits_b < len(b) else 1
        if lower_a - delta > 0:
            best = max(best, math.log((lower_a - delta) / upper_b))
    return best


def spec_with(dp: str, vdaf: dict[str, int | str]) -> TaskSpec:
    return TaskSpec.from_json(
        {
            "task_id": "A" * 43,
            "leader": "http://l/",
            "helper": "http://h/",
            "vdaf": vdaf,
            "min_batch_size": 1,
            "time_precision": TIME_PRECISION,
            "dp": dp,
        }
    )


DRAWS = 50_000
ALPHA = 1e-3  # the false-failure rate of each check


@pytest.mark.parametrize("vdaf", [{"type": "count"}, {"type": "sum", "max_measurement": 5}])
def test_one_honest_aggregator_hides_one_report_at_the_stated_epsilon(
    vdaf: dict[str, int | str],
) -> None:
    """Neighbouring batches: the same reports but one, which is 0 in one batch and the largest
    value in the other (Count 1, Sum max_measurement): the samples cannot prove a loss above
    epsilon; and the same test finds the loss of a noise scaled for twice that epsilon."""
    epsilon = 1.0
    spec = spec_with(f"laplace:{epsilon}", vdaf)
    top = spec.sensitivity()
    d, d_prime = (
        one_aggregator_outputs(spec, 10 + top, DRAWS, 1),
        one_aggregator_outputs(spec, 10, DRAWS, 2),
    )
    assert largest_certified_loss(d, d_prime, 0.0, ALPHA) <= epsilon
    weak = spec_with(f"laplace:{2 * epsilon}", vdaf)
    d, d_prime = (
        one_aggregator_outputs(weak, 10 + top, DRAWS, 3),
        one_aggregator_outputs(weak, 10, DRAWS, 4),
    )
    assert largest_certified_loss(d, d_prime, 0.0, ALPHA) > epsilon


def test_one_honest_aggregators_discrete_gaussian_meets_its_epsilon_delta() -> None:
    """The Gaussian task's per-collection (epsilon, delta) from rho-zCDP, checked the same way
    on the worst pair of Sum (0 against max_measurement)."""
    rho, delta = Fraction(1, 2), 1e-3
    spec = spec_with(f"gaussian:{rho}", {"type": "sum", "max_measurement": 3})
    epsilon = Zcdp(float(rho)).epsilon_at(delta)
    d, d_prime = (
        one_aggregator_outputs(spec, 13, DRAWS, 5),
        one_aggregator_outputs(spec, 10, DRAWS, 6),
    )
    assert largest_certified_loss(d, d_prime, delta, ALPHA) <= epsilon
    assert largest_certified_loss(d_prime, d, delta, ALPHA) <= epsilon
