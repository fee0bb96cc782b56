"""Randomized response inside Prio3 (analysis/dap_local.py): the collected histogram of
randomized indices plus both Aggregators' discrete Laplace noise, debiased, is unbiased and
its standard errors are right (simulated; the Prio3 sum of valid one-hot reports is exact, which
tests/collector/dap checks with real processes)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from analysis.dap_local import debias_local, for_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.grr import GRR
from client_sdk.sampling import DiscreteLaplace
from tests.client_sdk.dap.test_campaign import document

REPETITIONS = 400
N = 2_000
TRUE = np.array([0.5, 0.25, 0.15, 0.10])
CENTRAL_EPSILON = Fraction(1, 2)


def collected(local: GRR, rng: np.random.Generator, noise: DiscreteLaplace) -> dict[str, object]:
    """What ``analysis.dap_collect.collect`` returns for N devices randomizing with ``local``."""
    # A fixed population (GRR's variance is that of one population's randomization).
    values = np.repeat(np.arange(len(TRUE)), (TRUE * N).astype(int))
    reports = local.perturb(values, rng=rng)
    counts = np.bincount(reports, minlength=local.k)
    noisy = counts + noise.sample(rng, local.k) + noise.sample(rng, local.k)  # two Aggregators
    std = float(np.sqrt(2 * noise.variance()))
    return {
        "report_count": N,
        "estimate": [int(c) for c in noisy],
        "std_errors": [std] * local.k,
        "epsilon": float(CENTRAL_EPSILON),
        "dp": "laplace:1/2",
        "assumes": "at least one of the two aggregators is honest",
    }


def test_debiased_histogram_is_unbiased_with_calibrated_standard_errors() -> None:
    local = mechanism_from_config({"mechanism": "grr", "epsilon": 2.0, "k": 4})
    assert isinstance(local, GRR)  # the project's one randomized response (its privacy
    # claim is checked exactly in tests/client_sdk/mechanisms)
    noise = DiscreteLaplace(Fraction(2) / CENTRAL_EPSILON)
    rng = np.random.default_rng(20261204)
    estimates, errors = [], []
    for _ in range(REPETITIONS):
        result = debias_local(collected(local, rng, noise), local)
        estimates.append(result["estimate"])
        errors.append(result["std_errors"])
    est, err = np.array(estimates), np.array(errors)
    truth = TRUE * N
    # Unbiased: the mean of 400 estimates is within 5 of its standard errors of the truth.
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5 * err.mean(axis=0) / np.sqrt(REPETITIONS))
    # Calibrated: the predicted variance matches the empirical one (the empirical variance
    # of 400 draws has a relative standard error of sqrt(2/399) = 7%; 0.75-1.33 is 4 of them).
    ratio = (err**2).mean(axis=0) / est.var(axis=0, ddof=1)
    assert np.all((ratio > 0.75) & (ratio < 1.33)), ratio
    # 95% intervals cover 93-97% of 1,600 (their binomial standard error is 0.55%).
    coverage = np.mean(np.abs(est - truth) <= 1.96 * err)
    assert 0.93 <= coverage <= 0.97, coverage


def test_the_noise_is_part_of_the_standard_error() -> None:
    local = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 4})
    base = {"report_count": 1000, "estimate": [400, 300, 200, 100], "epsilon": 1.0, "dp": "x"}
    quiet = debias_local({**base, "std_errors": [0.0] * 4}, local)
    noisy = debias_local({**base, "std_errors": [50.0] * 4}, local)
    scale = local.p_star - local.q_star  # type: ignore[attr-defined]
    expected = np.sqrt(np.array(quiet["std_errors"]) ** 2 + (50.0 / scale) ** 2)
    assert noisy["std_errors"] == pytest.approx(expected)
    assert noisy["estimate"] == quiet["estimate"]
    assert noisy["guarantees"]["local"]["epsilon"] == 1.0
    assert noisy["guarantees"]["central"]["epsilon"] == 1.0


def test_a_count_randomized_on_the_device_is_debiased_too() -> None:
    local = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 2})
    result = debias_local(
        {"report_count": 1000, "estimate": 400, "std_errors": [3.0], "epsilon": None}, local
    )
    p, q = local.p_star, local.q_star  # type: ignore[attr-defined]
    assert result["estimate"] == pytest.approx((400 / 1000 - q) / (p - q) * 1000)
    assert len(result["std_errors"]) == 1 and result["guarantees"]["central"] is None


def test_for_campaign_checks_the_task_and_debiases_only_local_campaigns() -> None:
    local = document(local={"mechanism": "grr", "epsilon": 2, "k": 4})
    plain = document()
    task_id = bytes(range(32))
    result = {"report_count": 100, "estimate": [40, 30, 20, 10], "std_errors": [1.0] * 4}
    assert for_campaign(result, plain, task_id) == {**result, "campaign": "c"}
    assert for_campaign(result, local, task_id)["local_epsilon"] == 2.0
    with pytest.raises(ValueError, match="not of this task"):
        for_campaign(result, local, bytes(32))
