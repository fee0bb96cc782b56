"""Tests of analysis.postprocess and analysis.heavy_hitters.

Exact checks (brute force, closed forms, the dense channel matrix) use tolerances of float
rounding. Statistical checks use fixed seeds and state their margins:

- EM against the raw estimate: mean squared error over 40 randomizations of a Zipf population
  at epsilon 0.5; the MLE must be at most 0.5 x raw. Observed ratios at these seeds: GRR 0.16,
  OUE 0.23, HR 0.23, so the margin lies 6.7-8 standard errors of the mean difference away;
- the bootstrap samplers: means within z = 5.5 standard errors, variances within 5.5 relative
  standard errors sqrt(2/(B-1));
- interval coverage: the average over items and 150 repetitions within [0.90, 0.99] for a
  nominal 0.95 (about +-5 standard errors of a binomial average of 0.95 over 1500 draws, which
  are positively correlated, so wider than that);
- the family-wise error of the Bonferroni heavy-hitter test: at most alpha + 5.5 standard
  errors over 300 repetitions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from analysis import estimate
from analysis.estimation import FrequencyEstimate
from analysis.heavy_hitters import InsufficientReports, bonferroni_z, require_min_batch, top_k
from analysis.postprocess import (
    METHODS,
    PostProcessedEstimate,
    base_pos,
    bootstrap_interval,
    channel_for,
    diagonal_channel_mle,
    integer_counts,
    iterative_bayesian_update,
    mle,
    norm,
    norm_sub,
    parametric_bootstrap,
    postprocess,
    project_simplex,
)
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle
from tests.stats import Z_TOLERANCE, assert_within_z


def _oracle(config: dict[str, object]) -> FrequencyOracle:
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, FrequencyOracle)
    return mechanism


def _zipf_population(k: int, n: int, exponent: float = 1.5) -> np.ndarray:
    weights = 1.0 / np.arange(1, k + 1) ** exponent
    counts = integer_counts(weights / weights.sum(), n)
    return np.repeat(np.arange(k), counts)


def _estimate(config: dict[str, object], values: np.ndarray, seed: int) -> FrequencyEstimate:
    mechanism = _oracle(config)
    return estimate(mechanism, mechanism.perturb(values, rng=np.random.default_rng(seed)))


# ---- the simplex projection (norm-sub) --------------------------------------------------------


def _brute_force_projection(v: np.ndarray) -> np.ndarray:
    """argmin ||x - v|| over the simplex by enumerating supports (the KKT point of each face)."""
    best, best_distance = None, math.inf
    for size in range(1, v.size + 1):
        for support in itertools.combinations(range(v.size), size):
            idx = list(support)
            x = np.zeros_like(v)
            x[idx] = v[idx] - (v[idx].sum() - 1.0) / size
            if np.all(x[idx] >= 0):
                distance = float(np.sum((x - v) ** 2))
                if distance < best_distance:
                    best, best_distance = x, distance
    assert best is not None
    return best


def test_project_simplex_equals_brute_force() -> None:
    rng = np.random.default_rng(11)
    for trial in range(300):
        k = int(rng.integers(1, 7))
        v = rng.normal(scale=[0.1, 0.5, 2.0][trial % 3], size=k) + rng.normal(0, 0.3)
        projected, theta = project_simplex(v)
        expected = _brute_force_projection(v)
        np.testing.assert_allclose(projected, expected, atol=1e-12)
        np.testing.assert_allclose(projected, np.maximum(v - theta, 0.0), atol=1e-15)
        assert projected.sum() == pytest.approx(1.0, abs=1e-12)


def test_project_simplex_rows_and_invariants() -> None:
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 9))
    projected, theta = project_simplex(rows)
    for row, out, t in zip(rows, projected, theta, strict=True):
        single, single_theta = project_simplex(row)
        np.testing.assert_array_equal(out, single)
        assert t == single_theta
    distribution = rng.dirichlet(np.ones(9))
    np.testing.assert_allclose(project_simplex(distribution)[0], distribution, atol=1e-15)
    with pytest.raises(ValueError, match="finite"):
        project_simplex([0.5, np.nan])


def test_norm_sub_estimate_records_theta_and_is_the_projection() -> None:
    est = _estimate({"mechanism": "oue", "epsilon": 0.5, "k": 6}, _zipf_population(6, 300), 1)
    result = norm_sub(est, replicates=20)
    assert isinstance(result, PostProcessedEstimate)
    assert result.postprocessing == "norm-sub"
    np.testing.assert_allclose(
        result.frequencies, _brute_force_projection(est.frequencies), atol=1e-12
    )
    theta = result.details["theta"]
    kept = result.frequencies > 0
    np.testing.assert_allclose(result.frequencies[kept], est.frequencies[kept] - theta)
    assert result.details["zeroed_items"] == int(np.sum(~kept))
    assert result.raw is est


# ---- base-pos and norm -------------------------------------------------------------------------


def test_base_pos_clips_estimate_and_interval() -> None:
    est = _estimate({"mechanism": "grr", "epsilon": 0.5, "k": 12}, _zipf_population(12, 400), 2)
    assert np.any(est.frequencies < 0), "the fixture should have negative estimates"
    result = base_pos(est)
    np.testing.assert_array_equal(result.frequencies, np.maximum(est.frequencies, 0))
    np.testing.assert_array_equal(result.ci_low, np.maximum(est.ci_low, 0))
    np.testing.assert_array_equal(result.ci_high, np.maximum(est.ci_high, 0))
    assert result.details["clipped_items"] == int(np.sum(est.frequencies < 0))


def test_norm_shifts_every_item_equally_to_sum_one() -> None:
    est = _estimate({"mechanism": "oue", "epsilon": 1.0, "k": 8}, _zipf_population(8, 500), 3)
    result = norm(est, replicates=30)
    assert result.frequencies.sum() == pytest.approx(1.0, abs=1e-12)
    shift = result.details["shift"]
    np.testing.assert_allclose(result.frequencies - est.frequencies, shift, atol=1e-15)
    assert shift == pytest.approx((1 - est.frequencies.sum()) / 8)


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
    est = _estimate(config, _zipf_population(int(config["k"]), 800), 4)  # type: ignore[arg-type]
    mechanism = _oracle(config)
    channel = channel_for(mechanism, est.statistic)
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


def test_hadamard_channel_maps_match_the_dense_channel() -> None:
    rng = np.random.default_rng(8)
    for config in (
        {"mechanism": "hr", "epsilon": 1.0, "k": 5},
        {"mechanism": "hr", "epsilon": 4.0, "k": 20},
        {"mechanism": "hr", "epsilon": 6.0, "k": 30, "blocks": 10},
    ):
        mechanism = _oracle(config)
        dense = next(mechanism.channel_matrices())
        channel = channel_for(mechanism, mechanism.empty_statistic())
        theta = rng.dirichlet(np.ones(mechanism.k), size=4)
        ratio = rng.random((4, dense.shape[1]))
        np.testing.assert_allclose(channel.forward(theta), theta @ dense, atol=1e-15)
        np.testing.assert_allclose(channel.backward(ratio), ratio @ dense.T, atol=1e-13)


def test_em_stopping_rule_is_reported() -> None:
    est = _estimate({"mechanism": "grr", "epsilon": 0.5, "k": 64}, _zipf_population(64, 500), 6)
    capped = mle(est, max_iterations=2, replicates=0)
    assert capped.details["stopped_by"] == "max_iterations"
    assert capped.details["converged"] is False
    assert capped.details["iterations"] == 2
    assert capped.details["log_likelihood_gap"] > capped.details["tolerance"]
    done = mle(est, replicates=0)
    assert done.details["stopped_by"] == "tolerance" and done.details["converged"] is True
    assert done.details["log_likelihood_gap"] <= done.details["tolerance"]
    assert done.details["channel"] == "exact"
    mechanism = _oracle(est.mechanism)
    exact = diagonal_channel_mle(est.statistic.counts / est.n, mechanism.p_star, mechanism.q_star)
    # Certified within 0.01 of the maximal log-likelihood: close to the exact MLE.
    np.testing.assert_allclose(done.frequencies, exact, atol=0.02)
    oue = _estimate({"mechanism": "oue", "epsilon": 0.5, "k": 16}, _zipf_population(16, 500), 6)
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
    values = _zipf_population(32, 2000, exponent=1.5)
    truth = np.bincount(values, minlength=32) / values.size
    raw_errors, mle_errors = [], []
    for seed in range(40):
        est = _estimate(config, values, 1000 + seed)
        raw_errors.append(np.sum((est.frequencies - truth) ** 2))
        mle_errors.append(np.sum((mle(est, replicates=0).frequencies - truth) ** 2))
    raw_mse, mle_mse = float(np.mean(raw_errors)), float(np.mean(mle_errors))
    assert mle_mse <= 0.5 * raw_mse, f"MLE {mle_mse:.4g} vs raw {raw_mse:.4g}"


# ---- the raw estimate is never touched ---------------------------------------------------------


def test_postprocessing_never_mutates_the_raw_estimate() -> None:
    est = _estimate({"mechanism": "oue", "epsilon": 0.5, "k": 10}, _zipf_population(10, 400), 9)
    saved = {
        name: np.copy(getattr(est, name))
        for name in ("frequencies", "std_errors", "ci_low", "ci_high")
    }
    counts = np.copy(est.statistic.counts)
    for method in [*METHODS, "em"]:
        result = postprocess(est, method, replicates=20)
        assert result.raw is est
        for name, before in saved.items():
            np.testing.assert_array_equal(getattr(est, name), before)
            assert not np.shares_memory(getattr(result, name), getattr(est, name))
        np.testing.assert_array_equal(est.statistic.counts, counts)
        assert est.postprocessing == "base"
    # Post-processing a post-processed estimate starts again from the raw one.
    twice = postprocess(postprocess(est, "norm-sub", replicates=0), "base-pos")
    np.testing.assert_array_equal(twice.frequencies, np.maximum(est.frequencies, 0))


def test_dispatcher_names_and_errors() -> None:
    est = _estimate({"mechanism": "grr", "epsilon": 1.0, "k": 4}, _zipf_population(4, 200), 1)
    assert [postprocess(est, m, replicates=0).postprocessing for m in METHODS] == list(METHODS)
    assert postprocess(est, "em", replicates=0).postprocessing == "mle"
    assert postprocess(est, "ibu", replicates=0).postprocessing == "mle"
    with pytest.raises(ValueError, match=r"norm-sub.*got 'nrom-sub'"):
        postprocess(est, "nrom-sub")
    with pytest.raises(ValueError, match="sampler"):
        postprocess(est, "norm-sub", sampler="magic")
    oue = _estimate({"mechanism": "oue", "epsilon": 1.0, "k": 4}, _zipf_population(4, 200), 1)
    with pytest.raises(ValueError, match="needs an exact channel"):
        postprocess(oue, "norm-sub", sampler="multinomial")
    with pytest.raises(ValueError, match="is GRR's"):
        postprocess(oue, "norm-sub", sampler="exact")
    no_intervals = postprocess(est, "norm-sub", replicates=0)
    assert np.all(np.isnan(no_intervals.std_errors))
    assert "not computed" in no_intervals.details["intervals"]


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
    mechanism = _oracle(config)
    k = mechanism.k
    values = _zipf_population(k, 1000)
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
    values = _zipf_population(6, 300)
    for config, expected in (
        ({"mechanism": "grr", "epsilon": 1.0, "k": 6}, "exact"),
        ({"mechanism": "hr", "epsilon": 1.0, "k": 6}, "simulate"),
        ({"mechanism": "sue", "epsilon": 1.0, "k": 6}, "binomial"),
        ({"mechanism": "ss", "epsilon": 1.0, "k": 6}, "binomial"),
    ):
        est = _estimate(config, values, 2)
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
    mechanism = _oracle(config)
    values = _zipf_population(10, 2000, exponent=1.2)
    truth = np.bincount(values, minlength=10) / values.size
    rng = np.random.default_rng(77)
    covered = []
    for repetition in range(150):
        est = estimate(mechanism, mechanism.perturb(values, rng=rng))
        result = postprocess(est, method, replicates=100, seed=repetition)
        covered.append((result.ci_low <= truth) & (truth <= result.ci_high))
    coverage = float(np.mean(covered))
    assert 0.90 <= coverage <= 0.99, f"{method}: coverage {coverage:.3f}"


# ---- heavy hitters -----------------------------------------------------------------------------


def test_top_k_ranks_and_flags_only_what_stands_above_the_noise() -> None:
    """Over 300 repetitions, no null item is flagged in more than alpha + 5.5 SE of them."""
    k, n, alpha = 40, 4000, 0.05
    config = {"mechanism": "grr", "epsilon": 2.0, "k": k}
    mechanism = _oracle(config)
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
    est = _estimate({"mechanism": "oue", "epsilon": 1.0, "k": 20}, _zipf_population(20, 3000), 3)
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
    est = _estimate({"mechanism": "grr", "epsilon": 1.0, "k": 4}, _zipf_population(4, 50), 1)
    with pytest.raises(InsufficientReports, match=r"campaign 'launches' has 50 reports.*100"):
        top_k(est, 3, min_batch_size=100, campaign="launches")
    require_min_batch(100, 100, "ok")  # exactly the minimum is allowed
    with pytest.raises(ValueError, match="min_batch_size 7"):
        require_min_batch(6, 7)


def test_integer_counts_sum_to_n() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        f = rng.dirichlet(np.ones(7))
        n = int(rng.integers(1, 10_000))
        counts = integer_counts(f, n)
        assert counts.sum() == n and np.all(np.abs(counts - f * n) < 1 + 1e-9)


def test_walsh_hadamard_matches_the_sdk_transform() -> None:
    from analysis.postprocess import _walsh_hadamard
    from client_sdk.mechanisms.hadamard import fwht

    rng = np.random.default_rng(4)
    for size in (1, 2, 8, 32, 2048):
        values = rng.normal(size=(3, 2, size))
        np.testing.assert_allclose(_walsh_hadamard(size)(values), fwht(values), atol=1e-9)
    with pytest.raises(ValueError, match="power of two"):
        _walsh_hadamard(12)


def test_em_warm_start_reaches_the_same_maximum() -> None:
    est = _estimate({"mechanism": "hr", "epsilon": 1.0, "k": 16}, _zipf_population(16, 1500), 2)
    mechanism = _oracle(est.mechanism)
    channel = channel_for(mechanism, est.statistic)
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


def test_bootstrap_for_hadamard_mle_and_memoized_mechanisms() -> None:
    hr = _estimate({"mechanism": "hr", "epsilon": 1.0, "k": 16}, _zipf_population(16, 1500), 3)
    result = mle(hr, replicates=40)
    assert "warm-started" in result.details["bootstrap_refits"]
    assert np.all(np.isfinite(result.std_errors)) and np.all(result.ci_low <= result.ci_high)
    config = {
        "mechanism": "oue",
        "epsilon": 1.0,
        "k": 6,
        "longitudinal": {"epsilon_permanent": 3.0},
    }
    memoized = _oracle(config)
    values = _zipf_population(6, 600)
    reports = memoized.perturb_independent_devices(values, rng=np.random.default_rng(1))  # type: ignore[attr-defined]
    processed = norm_sub(estimate(memoized, reports), replicates=30)
    assert "sampler simulate" in processed.details["intervals"]
    assert np.all(processed.std_errors > 0)
