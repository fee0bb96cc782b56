"""Tests of analysis.heavy_hitters.

The family-wise error of the Bonferroni heavy-hitter test: at most alpha + 5.5 standard errors
over 300 repetitions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import estimate
from analysis.heavy_hitters import InsufficientReports, bonferroni_z, require_min_batch, top_k
from analysis.postprocess import (
    postprocess,
)
from tests.analysis.postprocess.common import estimate_of, oracle, zipf_population
from tests.stats import Z_TOLERANCE

# ---- heavy hitters -----------------------------------------------------------------------------


def test_top_k_ranks_and_flags_only_what_stands_above_the_noise() -> None:
    """Over 300 repetitions, no null item is flagged in more than alpha + 5.5 SE of them."""
    k, n, alpha = 40, 4000, 0.05
    config = {"mechanism": "grr", "epsilon": 2.0, "k": k}
    mechanism = oracle(config)
    values = np.concatenate([np.full(n // 2, 0), np.full(n // 4, 1), np.arange(n // 4) % 2 + 2])
    # items 0, 1 are heavy; 2, 3 share an eighth each; 4..39 are absent.
    rng = np.random.default_rng(12)
    repetitions, false_alarm_runs, heavy_found = 300, 0, 0
    for _ in range(repetitions):
        est = estimate(mechanism, mechanism.perturb(values, rng=rng))
        hitters = top_k(est, 10, alpha=alpha)
        assert [h.frequency for h in hitters] == sorted(est.frequencies, reverse=True)[:10]
        flagged = {h.index for h in hitters if h.significant}
        false_alarm_runs += bool(flagged - {0, 1, 2, 3})
        heavy_found += {0, 1} <= flagged
    rate = false_alarm_runs / repetitions
    assert rate <= alpha + Z_TOLERANCE * math.sqrt(alpha * (1 - alpha) / repetitions)
    assert heavy_found == repetitions


def test_top_k_threshold_and_post_processed_input() -> None:
    est = estimate_of({"mechanism": "oue", "epsilon": 1.0, "k": 20}, zipf_population(20, 3000), 3)
    z = bonferroni_z(0.05, 20)
    assert z == pytest.approx(2.8070, abs=1e-4)  # Phi^-1(1 - 0.05/20)
    for hitter in top_k(est, 20):
        assert hitter.threshold == pytest.approx(z * est.std_errors[hitter.index])
        assert hitter.significant == (est.frequencies[hitter.index] > hitter.threshold)
    processed = postprocess(est, "norm-sub", replicates=0)
    ranked = top_k(processed, 5)
    assert [h.frequency for h in ranked] == sorted(processed.frequencies, reverse=True)[:5]
    # Significance is tested on the raw estimate.
    for hitter in ranked:
        assert hitter.z == pytest.approx(
            est.frequencies[hitter.index] / est.std_errors[hitter.index]
        )
    with pytest.raises(ValueError, match="k must be a positive integer"):
        top_k(est, 0)


def test_min_batch_size_refusal_names_campaign_n_and_minimum() -> None:
    est = estimate_of({"mechanism": "grr", "epsilon": 1.0, "k": 4}, zipf_population(4, 50), 1)
    with pytest.raises(InsufficientReports, match=r"campaign 'launches' has 50 reports.*100"):
        top_k(est, 3, min_batch_size=100, campaign="launches")
    require_min_batch(100, 100, "ok")  # exactly the minimum is allowed
    with pytest.raises(ValueError, match="min_batch_size 7"):
        require_min_batch(6, 7)
