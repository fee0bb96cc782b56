"""parallel_poisson: Poisson sampling of disjoint shards across workers, against a Monte Carlo of
the privacy loss of the whole mechanism.

The mechanism simulated: n records split into W disjoint shards; every round each worker
Poisson-samples its shard at rate q (capped at B per worker when truncated), adds N(0, sigma^2)
to the sum of its batch's values and releases it. The record x = 1 sits in shard 0, the others
are 0 (the worst case of a sum of values in [0, 1]). The privacy loss of the joint output of all
W workers over T rounds is sampled directly, in each direction (with x against without, and
back), and delta(eps) = E[(1 - e^{eps - L})_+] is estimated with its standard error. The
account's delta is compared within z = 4 standard errors (two-sided error rate 6.3e-5 per
comparison) plus its stated pessimism (discretisation, under 1% of delta here).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from analysis.accounting import gaussian, parallel_poisson, poisson

Z = 4.0
PESSIMISM = 0.01  # the discretised PLD's delta may exceed the true one by this relative margin


def _shard0_density_ratio(out: np.ndarray, rate: float, sigma: float) -> np.ndarray:
    """ln p_with(o) - ln p_without(o) in shard 0: q' N(1, s^2) + (1 - q') N(0, s^2) against
    N(0, s^2)."""
    return np.asarray(
        np.logaddexp(math.log(rate) + (2 * out - 1) / (2 * sigma**2), math.log1p(-rate))
    )


def _monte_carlo_losses(
    rng: np.random.Generator,
    *,
    sigma: float,
    q: float,
    workers: int,
    shard: int,
    rounds: int,
    samples: int,
    with_record: bool,
    cap: int | None = None,
) -> np.ndarray:
    """Sample the total privacy loss of ``rounds`` rounds of the W-worker mechanism."""
    total = np.zeros(samples)
    # Shard 0's inclusion probability of x: q, or with a cap, q E[min(1, B / (|S| + 1))].
    rate = q
    if cap is not None:
        others = np.arange(shard)  # |S| ~ Bin(shard - 1, q)
        pmf = stats.binom.pmf(others, shard - 1, q)
        rate = q * float(np.sum(pmf * np.minimum(1.0, cap / (others + 1))))
    for _ in range(rounds):
        for worker in range(workers):
            # Every record but x is 0, so a worker's batch sum is 0, or 1 when x is in it.
            present = np.zeros(samples)
            if worker == 0 and with_record:
                present = (rng.random(samples) < rate).astype(np.float64)
            out = present + sigma * rng.standard_normal(samples)
            if worker == 0:
                ratio = _shard0_density_ratio(out, rate, sigma)
                total += ratio if with_record else -ratio
            # Other workers: the same density with or without x, a loss of exactly 0.
    return total


def _delta_estimate(losses: np.ndarray, eps: float) -> tuple[float, float]:
    values = -np.expm1(np.minimum(eps - losses, 0.0))
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size))


def test_parallel_poisson_matches_a_monte_carlo_of_the_privacy_loss() -> None:
    sigma, q, workers, n, rounds = 1.0, 0.1, 4, 400, 30
    account = parallel_poisson(gaussian(sigma), q, num_workers=workers) * rounds
    rng = np.random.default_rng(20261203)
    removes = _monte_carlo_losses(
        rng,
        sigma=sigma,
        q=q,
        workers=workers,
        shard=n // workers,
        rounds=rounds,
        samples=400_000,
        with_record=True,
    )
    adds = _monte_carlo_losses(
        rng,
        sigma=sigma,
        q=q,
        workers=workers,
        shard=n // workers,
        rounds=rounds,
        samples=400_000,
        with_record=False,
    )
    for eps in (0.5, 1.0, 1.5):
        (d_r, se_r), (d_a, se_a) = _delta_estimate(removes, eps), _delta_estimate(adds, eps)
        mc, se = (d_r, se_r) if d_r >= d_a else (d_a, se_a)
        ours = account.delta_at(eps)
        assert mc > 20 * se  # the estimate is informative at this eps
        assert ours >= mc - Z * se, (eps, ours, mc, se)
        assert ours <= mc * (1 + PESSIMISM) + Z * se, (eps, ours, mc, se)


def test_the_number_of_workers_costs_nothing_untruncated() -> None:
    """Parallel composition: W workers on disjoint shards cost one Poisson-sampled step."""
    plain = (poisson(gaussian(1.0), 0.02) * 20).epsilon_at(1e-6)
    for workers in (1, 3, 16):
        ours = (parallel_poisson(gaussian(1.0), 0.02, num_workers=workers) * 20).epsilon_at(1e-6)
        assert ours == plain


def test_truncated_shards_use_the_shard_size_and_dominate_a_monte_carlo() -> None:
    """Capped per worker: the account is poisson truncated on the record's shard; with unequal
    shards the envelope covers both. It must dominate the sampled loss of a real dataset."""
    sigma, q, cap, rounds = 1.0, 0.1, 12, 10
    account = parallel_poisson(
        gaussian(sigma), q, num_workers=4, truncated_batch_size=cap, dataset_size=400
    )
    shard = poisson(gaussian(sigma), q, truncated_batch_size=cap, dataset_size=100)
    for eps in (0.0, 0.3, 1.0):
        assert account.delta_at(eps) == pytest.approx(shard.delta_at(eps), rel=1e-12)
    uneven = parallel_poisson(
        gaussian(sigma), q, num_workers=4, truncated_batch_size=cap, dataset_size=402
    )
    small = poisson(gaussian(sigma), q, truncated_batch_size=cap, dataset_size=100)
    large = poisson(gaussian(sigma), q, truncated_batch_size=cap, dataset_size=101)
    for eps in (0.0, 0.3, 1.0):
        both = max(small.delta_at(eps), large.delta_at(eps))
        assert uneven.delta_at(eps) >= both * (1 - 1e-9)
    composed = uneven * rounds
    rng = np.random.default_rng(7)
    losses = _monte_carlo_losses(
        rng,
        sigma=sigma,
        q=q,
        workers=4,
        shard=101,
        rounds=rounds,
        samples=200_000,
        with_record=True,
        cap=cap,
    )
    for eps in (0.5, 1.0):
        mc, se = _delta_estimate(losses, eps)
        assert composed.delta_at(eps) >= mc - Z * se


def test_parallel_poisson_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        parallel_poisson(gaussian(1.0), 0.1, num_workers=0)
    with pytest.raises(ValueError, match="num_workers must be at most dataset_size"):
        parallel_poisson(gaussian(1.0), 0.1, num_workers=5, truncated_batch_size=2, dataset_size=4)
    with pytest.raises(ValueError, match="truncated_batch_size and dataset_size"):
        parallel_poisson(gaussian(1.0), 0.1, num_workers=2, truncated_batch_size=3)
