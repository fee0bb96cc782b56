"""The three trust models beside the curator (analysis.kinds.frequencies.gap.trust_models;
docs/math/central-and-shuffle.md).

The secure-aggregation column's exact variance is checked against a closed form derived
independently of the code (two independent discrete Laplace draws of scale b = 2/epsilon have
variance 2 * 2r/(1-r)^2 = 1/sinh^2(epsilon/4), r = exp(-1/b)), and against the task's own
sampler run many times at a fixed seed (Z standard errors, the standard error from the spread of
the squared errors). The layout test names the models in the JSON and in the table.

The DAP row's discrete Gaussian alternative is checked the same way: its rho against the CKS 2020
conversion minimised over a continuous order by scipy (not the code's grid), its variance
against the discrete Gaussian's pmf summed here, and against the task's sampler.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize

from analysis import cli
from analysis.accounting import Zcdp
from analysis.gap import GapOptions, kind_gap, parse_simulation, simulated_kind_gap
from analysis.kinds._common.gap import (
    dap_gaussian_task,
    dap_task,
    dap_variance,
    histogram_vdaf,
    run_dap,
)
from analysis.kinds.frequencies.gap import TRUST_MODELS
from client_sdk.amplification import calibrate_local_epsilon
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle
from tests.analysis.gap_tolerance import Z, laplace_mse_tolerance

K = 100


def _olh(epsilon: float) -> FrequencyOracle:
    mechanism = mechanism_from_config({"mechanism": "olh", "epsilon": epsilon, "k": K})
    assert isinstance(mechanism, FrequencyOracle)
    return mechanism


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_secure_aggregation_variance_is_two_discrete_laplace_draws(epsilon: float) -> None:
    n = 100_000
    models = kind_gap(_olh(epsilon), n, GapOptions())["trust_models"]["models"]
    dap, curator = models["secure_aggregation"], models["curator"]
    assert dap["variance"] == pytest.approx(1 / math.sinh(epsilon / 4) ** 2 / n**2, rel=1e-12)
    r = math.exp(-epsilon / 2)
    assert curator["geometric_variance"] == pytest.approx(2 * r / (1 - r) ** 2 / n**2, rel=1e-12)
    # two honest aggregators' draws: exactly twice the geometric curator's variance
    assert dap["variance"] == pytest.approx(2 * curator["geometric_variance"], rel=1e-12)
    assert curator["variance"] == pytest.approx(8 / (n * epsilon) ** 2, rel=1e-12)
    # the target: within a factor 2 of the central Laplace error
    assert dap["std_error_over_curator"] < 2
    kind, _, value = dap["dp"].partition(":")
    assert kind == "laplace" and Fraction(value) == Fraction(epsilon)
    assert dap["vdaf"]["type"] == "histogram" and dap["vdaf"]["length"] == K


def test_secure_aggregation_variance_against_the_task_sampler() -> None:
    """The exact variance against the real sampler (client_sdk.sampling.DiscreteLaplace, as the
    aggregators call it), 300 runs of k = 100 buckets at seed 7: the mean of 30,000 squared
    errors, within about 1.1% of the truth per standard error."""
    n, runs = 1000, 300
    task = dap_task(histogram_vdaf(K), 1.0)
    counts = np.full(K, n // K)
    rng = np.random.default_rng(7)
    errors = np.asarray([run_dap(counts, task, rng=rng) for _ in range(runs)]) - counts / n
    squared = (errors**2).ravel()
    std_error = float(np.std(squared, ddof=1) / math.sqrt(squared.size))
    assert abs(float(np.mean(squared)) - dap_variance(task, n)) < Z * std_error
    # symmetric about the truth: the mean error within Z of its standard error
    assert abs(float(np.mean(errors))) < Z * math.sqrt(dap_variance(task, n) / errors.size)
    # a sum of two draws, not one: one draw's variance is Z standard errors away
    assert float(np.mean(squared)) - dap_variance(task, n) / 2 > Z * std_error


def _cks_epsilon(rho: float, delta: float) -> float:
    """CKS 2020, Corollary 13 solved for epsilon, minimised over a continuous order alpha."""

    def epsilon(alpha: float) -> float:
        return (
            alpha * rho + math.log1p(-1 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1)
        )

    return float(optimize.minimize_scalar(epsilon, bounds=(1 + 1e-9, 1e6), method="bounded").fun)


def _discrete_gaussian_variance(sigma2: float) -> float:
    """Var[N_Z(0, sigma^2)] from its pmf, proportional to exp(-x^2 / (2 sigma^2))."""
    x = np.arange(-int(40 * math.sqrt(sigma2)) - 10, int(40 * math.sqrt(sigma2)) + 11)
    weights = np.exp(-(x.astype(np.float64) ** 2) / (2 * sigma2))
    return float(np.sum(x**2 * weights) / np.sum(weights))


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-6), (1.0, 1e-6), (2.0, 1e-9)])
def test_the_gaussian_alternative_at_the_same_epsilon_and_delta(
    epsilon: float, delta: float
) -> None:
    n = 100_000
    models = kind_gap(_olh(epsilon), n, GapOptions(delta=delta))["trust_models"]["models"]
    dap, curator = models["secure_aggregation"], models["curator"]
    gaussian = dap["gaussian"]
    rho = gaussian["rho"]
    assert gaussian["delta"] == delta and gaussian["dp"].startswith("gaussian:")
    assert float(Fraction(gaussian["dp"].partition(":")[2])) == rho
    # rho meets (epsilon, delta) by the conversion, and is (within 1e-6) the largest that does
    assert gaussian["epsilon_at_delta"] == Zcdp(rho).epsilon_at(delta) <= epsilon
    assert Zcdp(rho * (1 + 1e-6)).epsilon_at(delta) > epsilon
    # the grid's conversion is the continuous optimum's within 1e-3, and never below it
    assert _cks_epsilon(rho, delta) <= epsilon <= _cks_epsilon(rho, delta) * (1 + 1e-3)
    # each aggregator: sigma^2 >= Delta_2^2 / (2 rho) = 1/rho for a histogram, rounded up to
    # an integer t*m the exact sampler offers (within 1% here)
    sigma2 = gaussian["sigma2"]
    assert gaussian["sigma"] == math.sqrt(sigma2)
    assert 1 / rho <= sigma2 <= (1 / rho + 1) * 1.01
    # two aggregators' independent draws over n
    expected = 2 * _discrete_gaussian_variance(sigma2) / n**2
    assert gaussian["variance"] == pytest.approx(expected, rel=1e-9)
    assert gaussian["std_error"] == pytest.approx(math.sqrt(expected), rel=1e-9)
    ratio = math.sqrt(expected / curator["variance"])
    assert gaussian["std_error_over_curator"] == pytest.approx(ratio, rel=1e-9)
    # one collection of a histogram: the Gaussian costs more than the Laplace task
    assert gaussian["variance"] > dap["variance"]
    assert 0 < gaussian["share_of_gap_closed"] < dap["share_of_gap_closed"]


def test_the_gaussian_alternative_against_the_task_sampler() -> None:
    """The exact variance of the Gaussian task against its sampler (client_sdk.sampling.
    DiscreteGaussian, as the aggregators call it), 300 runs of k = 100 at seed 11."""
    n, runs = 1000, 300
    task = dap_gaussian_task(histogram_vdaf(K), 1.0, 1e-6)
    counts = np.full(K, n // K)
    rng = np.random.default_rng(11)
    errors = np.asarray([run_dap(counts, task, rng=rng) for _ in range(runs)]) - counts / n
    squared = (errors**2).ravel()
    std_error = float(np.std(squared, ddof=1) / math.sqrt(squared.size))
    assert abs(float(np.mean(squared)) - dap_variance(task, n)) < Z * std_error
    assert abs(float(np.mean(errors))) < Z * math.sqrt(dap_variance(task, n) / errors.size)
    assert float(np.mean(squared)) - dap_variance(task, n) / 2 > Z * std_error


def test_the_models_side_by_side_in_the_json_and_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = json.dumps({"mechanism": "olh", "epsilon": 1, "k": K})
    assert cli.main(["gap", "--mechanism", config, "--n", "100000", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    trust = document["trust_models"]
    assert (
        tuple(trust["models"])
        == TRUST_MODELS
        == (
            "local",
            "shuffled",
            "secure_aggregation",
            "curator",
        )
    )
    models = trust["models"]
    assert trust["central_epsilon"] == 1.0 and trust["n"] == 100_000
    assert models["local"]["mechanism"]["mechanism"] == "olh"
    assert models["shuffled"]["local_epsilon"] == pytest.approx(
        calibrate_local_epsilon(1.0, 100_000, 1e-6)
    )
    variances = [models[name]["variance"] for name in TRUST_MODELS]
    assert variances == sorted(variances, reverse=True)  # each trusts more, pays less
    assert models["local"]["share_of_gap_closed"] == 0.0
    assert models["curator"]["share_of_gap_closed"] == 1.0
    assert (
        0
        < models["shuffled"]["share_of_gap_closed"]
        < models["secure_aggregation"]["share_of_gap_closed"]
        < 1
    )
    for name in TRUST_MODELS:
        assert models[name]["std_error"] == pytest.approx(math.sqrt(models[name]["variance"]))
        assert models[name]["trusts"] and models[name]["guarantee"]
    assert cli.main(["gap", "--mechanism", config, "--n", "100000", "--format", "table"]) == 0
    table = capsys.readouterr().out
    for name in TRUST_MODELS:
        assert f"trust_models.models.{name}.std_error " in table
        assert f"trust_models.models.{name}.share_of_gap_closed " in table
    for key in ("rho", "sigma", "std_error", "share_of_gap_closed"):
        assert f"trust_models.models.secure_aggregation.gaussian.{key} " in table


def test_the_models_at_a_central_target_and_at_a_stored_campaigns_batches() -> None:
    olh = _olh(8.0)
    trust = kind_gap(olh, 50_000, GapOptions(central_epsilon=0.5))["trust_models"]
    models = trust["models"]
    assert trust["central_epsilon"] == 0.5
    # the local model is the campaign's oracle rebuilt at the central epsilon
    # (OLH's g chosen again at 0.5, as a campaign configured there would have it)
    fresh = mechanism_from_config({"mechanism": "olh", "epsilon": 0.5, "k": K})
    assert models["local"]["mechanism"] == fresh.to_config()
    assert models["secure_aggregation"]["variance"] == pytest.approx(
        1 / math.sinh(0.5 / 4) ** 2 / 50_000**2
    )
    stored = kind_gap(olh, 30_000, GapOptions(batch_sizes=(10_000, 20_000)))
    column = stored["shuffled_column"]
    assert stored["trust_models"]["central_epsilon"] == column["central_epsilon"]
    assert stored["trust_models"]["models"]["shuffled"]["local_epsilon"] == 8.0


def test_the_models_measured_in_a_simulation() -> None:
    n, runs = 40_000, 20
    document = simulated_kind_gap(
        _olh(1.0), n, parse_simulation("zipf"), GapOptions(repetitions=runs), seed=5
    )
    exact = document["trust_models"]["models"]
    measured = document["simulation"]["trust_models_measured"]
    assert measured["repetitions"] == runs
    for name in TRUST_MODELS:
        figures = measured[name]
        # local and shuffled: the exact expectation at the true frequencies, near Var*/n for the
        # local model (OLH's f-dependent term is small at epsilon 1, and negative when
        # p + q > 1); at the shuffled epsilon0 of about 6.6 it dominates (a Zipf population)
        if name != "shuffled":
            assert figures["expected"] == pytest.approx(exact[name]["variance"], rel=0.5)
        assert abs(figures["mse"] - figures["expected"]) < Z * figures["mse_std_error"]
    assert measured["secure_aggregation"]["expected"] == exact["secure_aggregation"]["variance"]
    gaussian = measured["secure_aggregation"]["gaussian"]
    assert gaussian["expected"] == exact["secure_aggregation"]["gaussian"]["variance"]
    assert abs(gaussian["mse"] - gaussian["expected"]) < Z * gaussian["mse_std_error"]
    expected = exact["curator"]["variance"]
    tolerance = laplace_mse_tolerance(expected, K * runs)
    assert abs(measured["curator"]["mse"] - expected) < tolerance


@pytest.mark.parametrize(("name", "shape"), [("olh", "g"), ("ss", "d"), ("hr", "blocks")])
def test_the_shuffled_oracle_resolves_its_shape_at_epsilon0(name: str, shape: str) -> None:
    """OLH's g (SS's d, HR's blocks) is chosen from epsilon: the shuffled model's oracle at
    epsilon0 takes the one a campaign configured at epsilon0 would have, not the one of
    epsilon 1 (OLH with g = 4 at epsilon0 = 7.07 has 100 times the variance)."""
    n = 100_000
    mechanism = mechanism_from_config({"mechanism": name, "epsilon": 1.0, "k": K})
    document = kind_gap(mechanism, n, GapOptions())
    eps0 = document["shuffled_column"]["local_epsilon"]
    fresh = mechanism_from_config({"mechanism": name, "epsilon": eps0, "k": K})
    assert isinstance(fresh, FrequencyOracle)
    assert fresh.to_config()[shape] != mechanism.to_config()[shape]
    expected = fresh.variance_per_user() / n
    assert document["shuffled_column"]["exact"]["shuffled_variance"] == pytest.approx(expected)
    assert document["trust_models"]["models"]["shuffled"]["variance"] == pytest.approx(expected)
    # at its own epsilon the oracle is kept as configured (an explicit g stays)
    explicit = mechanism_from_config({"mechanism": "olh", "epsilon": 1.0, "k": K, "g": 9})
    local = kind_gap(explicit, n, GapOptions())["trust_models"]["models"]["local"]
    assert local["mechanism"]["g"] == 9
