"""Tests of analysis.postprocess.em and of the mechanisms' EM channels.

Exact checks (closed forms, the dense channel matrix) use tolerances of float rounding. EM
against the raw estimate: mean squared error over 40 randomizations of a Zipf population at
epsilon 0.5; the MLE must be at most 0.5 x raw. Observed ratios at these seeds: GRR 0.16, OUE
0.23, HR 0.23, so the margin lies 6.7-8 standard errors of the mean difference away.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.postprocess import (
    diagonal_channel_mle,
    iterative_bayesian_update,
    mle,
)
from tests.analysis.postprocess.common import estimate_of, oracle, zipf_population

# ---- EM ----------------------------------------------------------------------------------------


def test_diagonal_mle_is_the_maximiser() -> None:
    """The closed form beats every other point of the simplex, and EM converges to it."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        k = int(rng.integers(2, 8))
        p = float(rng.uniform(0.2, 0.9))
        q = float(rng.uniform(0.01, p * 0.9))
        observed = rng.dirichlet(np.full(k, 0.5))
        best = diagonal_channel_mle(observed, p, q)
        assert np.all(best >= 0) and best.sum() == pytest.approx(1.0, abs=1e-12)

        def loglik(
            theta: np.ndarray, o: np.ndarray = observed, p: float = p, q: float = q
        ) -> float:
            return float(np.sum(o * np.log(q + (p - q) * theta)))

        for candidate in rng.dirichlet(np.ones(k), size=200):
            assert loglik(candidate) <= loglik(best) + 1e-12

        def apply(x: np.ndarray, p: float = p, q: float = q) -> np.ndarray:
            return q * x.sum(axis=-1, keepdims=True) + (p - q) * x

        fitted = iterative_bayesian_update(observed, apply, apply, k, tol=1e-13)
        assert fitted.converged
        np.testing.assert_allclose(fitted.theta, best, atol=1e-5)


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "grr", "epsilon": 0.5, "k": 10},
        {"mechanism": "hr", "epsilon": 1.0, "k": 12},
        {"mechanism": "hr", "epsilon": 5.0, "k": 12},  # several blocks
    ],
)
def test_em_exact_channel_stays_on_simplex_and_likelihood_is_monotone(
    config: dict[str, object],
) -> None:
    k = config["k"]
    assert isinstance(k, int)
    est = estimate_of(config, zipf_population(k, 800), 4)
    mechanism = oracle(config)
    channel = mechanism.em_channel()
    assert channel.kind == "exact"
    observed = channel.observe(est.statistic)
    for accelerate in (False, True):
        result = iterative_bayesian_update(
            observed,
            channel.forward,
            channel.backward,
            mechanism.k,
            tol=1e-12,
            max_iterations=3000,
            accelerate=accelerate,
            record_log_likelihood=True,
        )
        assert result.log_likelihood is not None and len(result.log_likelihood) >= 2
        steps = np.diff(result.log_likelihood)
        assert np.all(steps >= -1e-13), f"log-likelihood fell by {-steps.min():.3g}"
        assert np.all(result.theta >= 0) and result.theta.sum() == pytest.approx(1.0, abs=1e-12)
    # Converged: the certified gap bounds the likelihood shortfall, and the KKT conditions hold.
    fitted = iterative_bayesian_update(
        observed, channel.forward, channel.backward, mechanism.k, tol=1e-10
    )
    assert fitted.converged and fitted.stopped_by == "tolerance" and fitted.gap <= 1e-10
    predicted = channel.forward(fitted.theta)
    gradient = channel.backward(np.where(observed > 0, observed / predicted, 0.0))
    assert gradient.max() <= 1 + 1e-10
    active = fitted.theta > 1e-3
    np.testing.assert_allclose(gradient[active], 1.0, atol=1e-6)


def test_em_stopping_rule_is_reported() -> None:
    est = estimate_of({"mechanism": "grr", "epsilon": 0.5, "k": 64}, zipf_population(64, 500), 6)
    capped = mle(est, max_iterations=2, replicates=0)
    assert capped.details["stopped_by"] == "max_iterations"
    assert capped.details["converged"] is False
    assert capped.details["iterations"] == 2
    assert capped.details["log_likelihood_gap"] > capped.details["tolerance"]
    done = mle(est, replicates=0)
    assert done.details["stopped_by"] == "tolerance" and done.details["converged"] is True
    assert done.details["log_likelihood_gap"] <= done.details["tolerance"]
    assert done.details["channel"] == "exact"
    mechanism = oracle(est.mechanism)
    exact = diagonal_channel_mle(est.statistic.counts / est.n, mechanism.p_star, mechanism.q_star)
    # Certified within 0.01 of the maximal log-likelihood: close to the exact MLE.
    np.testing.assert_allclose(done.frequencies, exact, atol=0.02)
    oue = estimate_of({"mechanism": "oue", "epsilon": 0.5, "k": 16}, zipf_population(16, 500), 6)
    assert mle(oue, replicates=0).details["channel"] == "support-count approximation"


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "grr", "epsilon": 0.5, "k": 32},
        {"mechanism": "oue", "epsilon": 0.5, "k": 32},
        {"mechanism": "hr", "epsilon": 0.5, "k": 32},
    ],
)
def test_em_beats_raw_mse_on_a_skewed_population(config: dict[str, object]) -> None:
    values = zipf_population(32, 2000, exponent=1.5)
    truth = np.bincount(values, minlength=32) / values.size
    raw_errors, mle_errors = [], []
    for seed in range(40):
        est = estimate_of(config, values, 1000 + seed)
        raw_errors.append(np.sum((est.frequencies - truth) ** 2))
        mle_errors.append(np.sum((mle(est, replicates=0).frequencies - truth) ** 2))
    raw_mse, mle_mse = float(np.mean(raw_errors)), float(np.mean(mle_errors))
    assert mle_mse <= 0.5 * raw_mse, f"MLE {mle_mse:.4g} vs raw {raw_mse:.4g}"


def test_em_warm_start_reaches_the_same_maximum() -> None:
    est = estimate_of({"mechanism": "hr", "epsilon": 1.0, "k": 16}, zipf_population(16, 1500), 2)
    mechanism = oracle(est.mechanism)
    channel = mechanism.em_channel()
    observed = channel.observe(est.statistic)
    cold = iterative_bayesian_update(observed, channel.forward, channel.backward, 16, tol=1e-12)
    start = np.random.default_rng(0).dirichlet(np.ones(16))
    warm = iterative_bayesian_update(
        observed, channel.forward, channel.backward, 16, tol=1e-12, initial=start
    )
    assert cold.converged and warm.converged
    np.testing.assert_allclose(warm.theta, cold.theta, atol=1e-4)
    with pytest.raises(ValueError, match="strictly positive"):
        iterative_bayesian_update(
            observed, channel.forward, channel.backward, 16, initial=np.zeros(16)
        )
