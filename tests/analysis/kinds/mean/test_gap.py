"""The central gap of mean campaigns (analysis.kinds.mean.gap).

Exact figures are checked against the formulas written out here; measured ones against their
exact expectations: the curator's Laplace noise over many repetitions (the mean squared error
of Laplace noise of variance V over m draws has standard deviation sqrt(5/m) V), and the local
estimate's squared error, averaged over fixed seeds, against its exact variance (a mean of m
chi-square(1)/1 ratios has standard deviation sqrt(2/m) when the errors are normal).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from analysis.gap import (
    GapOptions,
    kind_gap,
    parse_simulation,
    simulated_kind_gap,
)
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from client_sdk.mechanisms.numeric import NumericMechanism
from tests.analysis.gap_tolerance import Z, laplace_mse_tolerance

ZIPF = parse_simulation("zipf")


@pytest.mark.parametrize(
    ("config", "l1", "l2"),
    [
        ({"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 10}, 10.0, 10.0),
        ({"mechanism": "duchi", "epsilon": 2.0, "lower": -1, "upper": 1, "dim": 4}, 8.0, 4.0),
        (
            {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "dim": 3, "clip_norm": 2},
            4 * math.sqrt(3),
            4.0,
        ),
    ],
)
def test_mean_gap_exact(config: dict[str, Any], l1: float, l2: float) -> None:
    m = mechanism_from_config(config)
    assert isinstance(m, NumericMechanism)
    n = 10_000
    document = kind_gap(m, n)
    epsilon = config["epsilon"]
    assert document["kind"] == "mean"
    assert document["l1_sensitivity"] == pytest.approx(l1)
    assert document["l2_sensitivity"] == pytest.approx(l2)
    assert document["central_laplace_variance"] == pytest.approx(2 * (l1 / epsilon) ** 2 / n**2)
    sigma = analytic_gaussian_sigma(epsilon, 1e-6, l2)
    assert document["central_gaussian_variance"] == pytest.approx(sigma**2 / n**2)
    worst = float(np.max(m.worst_case_variance())) / n
    assert document["ldp_variance_worst_case"] == pytest.approx(worst)
    assert document["variance_ratio"] == pytest.approx(worst / document["central_laplace_variance"])
    half = kind_gap(m, n, GapOptions(neighbouring="add-remove"))
    assert half["l1_sensitivity"] == pytest.approx(l1 / 2)


@pytest.mark.parametrize(
    "config",
    [
        {"mechanism": "piecewise", "epsilon": 1.0, "lower": 0, "upper": 60},
        {"mechanism": "hybrid", "epsilon": 2.0, "lower": 0, "upper": 1, "dim": 3},
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 1, "buckets": 4},
        {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 1, "gamma": 0.1},
    ],
)
def test_mean_gap_measured_against_its_exact_variance(config: dict[str, Any]) -> None:
    m = mechanism_from_config(config)
    assert isinstance(m, NumericMechanism)
    ratios = []
    for seed in range(120):
        simulation = simulated_kind_gap(
            m, 1000, parse_simulation("lognormal"), GapOptions(repetitions=2), seed=seed
        )["simulation"]
        ratios.append(simulation["ldp_squared_error"] / simulation["ldp_expected"])
    dim = m.width
    # a vector's squared error averages its coordinates: at least 120 independent ratios
    assert abs(np.mean(ratios) - 1) < Z * math.sqrt(2 / 120), (dim, np.mean(ratios))
    wide = simulated_kind_gap(m, 1000, ZIPF, GapOptions(repetitions=400), seed=1)["simulation"]
    expected = wide["central_laplace_expected"]
    assert abs(wide["central_laplace_mse"] - expected) < laplace_mse_tolerance(expected, 400 * dim)
