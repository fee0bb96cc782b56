"""Truncated Poisson sampling against dp-accounting's truncated subsampled Gaussian.

A batch of more than B records is cut to a random B. dp-accounting (arXiv 2508.15089) accounts
for the capped case as a substitution-subsampled Gaussian ("a subsample of a subsample"); ours
follows it, so on a grid of caps, sample rates, noise multipliers and steps it must stay within
5% of dp-accounting and never fall below it beyond discretisation (both are upper bounds on the
true epsilon). The old treatment counted every overflow as revealing everything: infinite
epsilon wherever truncation can happen (issue 21, item 10).
"""

from __future__ import annotations

import functools
import math

import pytest
from dp_accounting import dp_event, pld
from scipy import stats

from analysis.accounting import PrivacyAccount, gaussian, poisson, randomized_response

ADD_OR_REMOVE = pld.pld_privacy_accountant.NeighborRel.ADD_OR_REMOVE_ONE

GRID = [
    # (noise multiplier, sample rate, cap B, dataset size n, steps, delta)
    (1.0, 0.01, 120, 10_000, 100, 1e-5),  # issue 21: inf (old) against 3.60
    (1.0, 0.01, 140, 10_000, 100, 1e-5),  # inf against 0.76
    (1.0, 0.01, 150, 10_000, 100, 1e-5),  # inf against 0.719
    (1.0, 0.01, 160, 10_000, 100, 1e-5),  # 0.736 against 0.718
    (1.0, 0.01, 200, 10_000, 100, 1e-5),
    (0.8, 0.02, 180, 8_000, 50, 1e-6),
    (2.0, 0.05, 130, 2_500, 300, 1e-5),
    (1.5, 0.005, 170, 30_000, 200, 1e-6),
]


@functools.cache
def _ours(sigma: float, q: float, cap: int, n: int, steps: int) -> PrivacyAccount:
    return poisson(gaussian(sigma), q, truncated_batch_size=cap, dataset_size=n) * steps


def _theirs(sigma: float, q: float, cap: int, n: int, steps: int, delta: float) -> float:
    accountant = pld.PLDAccountant(ADD_OR_REMOVE)
    accountant.compose(dp_event.TruncatedSubsampledGaussianDpEvent(n, q, cap, sigma), steps)
    return float(accountant.get_epsilon(delta))


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "q", "cap", "n", "steps", "delta"), GRID)
def test_truncated_poisson_matches_dp_accounting(
    sigma: float, q: float, cap: int, n: int, steps: int, delta: float
) -> None:
    overflow = float(stats.binom.sf(cap - 1, n - 1, q))
    assert overflow > 1e-30  # truncation can happen at every point of the grid
    ours = _ours(sigma, q, cap, n, steps).epsilon_at(delta)
    theirs = _theirs(sigma, q, cap, n, steps, delta)
    assert math.isfinite(ours)
    assert theirs * (1 - 1e-3) <= ours <= theirs * 1.05, (sigma, q, cap, n, steps, ours, theirs)


def test_the_issue_example_is_finite() -> None:
    """issue 21: (poisson(gaussian(1.0), 0.01, B=150, n=10_000) * 100) at 1e-5 was inf."""
    account = _ours(1.0, 0.01, 150, 10_000, 100)
    assert account.epsilon_at(1e-5) == pytest.approx(0.7188, rel=0.01)
    assert account.delta_at(math.inf) < 1e-10  # old: 100 overflows of 1.65e-6 at +inf


def test_truncation_costs_nothing_when_it_cannot_happen_and_never_helps() -> None:
    """B >= n: the cap is never reached, the account is plain Poisson; a tight cap costs more."""
    plain = (poisson(gaussian(1.0), 0.05) * 5).epsilon_at(1e-2)
    never = (
        poisson(gaussian(1.0), 0.05, truncated_batch_size=1000, dataset_size=1000) * 5
    ).epsilon_at(1e-2)
    assert never == plain
    capped = [
        (poisson(gaussian(1.0), 0.05, truncated_batch_size=b, dataset_size=1000) * 5).epsilon_at(
            1e-2
        )
        for b in (40, 50, 60, 80)
    ]
    assert capped == sorted(capped, reverse=True)
    assert capped[-1] >= plain * (1 - 1e-9)


def test_a_non_gaussian_step_still_counts_the_overflow_as_revealing_everything() -> None:
    """No substitution analysis for other steps: the capped case is the all-revealing pair."""
    n, q, cap = 1000, 0.05, 65
    overflow = float(stats.binom.sf(cap - 1, n - 1, q))
    step = randomized_response(1.0, 2)
    plain = poisson(step, q)
    truncated = poisson(step, q, truncated_batch_size=cap, dataset_size=n)
    for eps in (0.0, 0.5, 1.0):
        assert truncated.delta_at(eps) == pytest.approx(
            (1 - overflow) * plain.delta_at(eps) + overflow, rel=1e-12
        )
