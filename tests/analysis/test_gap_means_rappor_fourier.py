"""The central gap of mean, RAPPOR and Fourier-marginal campaigns (analysis.kinds.mean.gap,
analysis.kinds.rappor.gap, analysis.kinds.fourier.gap).

Exact figures are checked against the formulas written out here; measured ones against their
exact expectations: the curator's Laplace noise over many repetitions (the mean squared error
of Laplace noise of variance V over m draws has standard deviation sqrt(5/m) V), and the local
estimate's squared error, averaged over fixed seeds, against its exact variance (a mean of m
chi-square(1)/1 ratios has standard deviation sqrt(2/m) when the errors are normal).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from analysis import estimate
from analysis.cli import main
from analysis.gap import (
    GapOptions,
    central_gaussian_sigma,
    kind_gap,
    measured_kind_gap,
    parse_simulation,
    simulated_kind_gap,
)
from analysis.kinds.fourier.gap import _sum_down, _true_table
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma

Z = 5.0
ZIPF = parse_simulation("zipf")
FOURIER = {"mechanism": "fourier", "epsilon": 1.0, "order": 2,
           "attributes": [{"name": n} for n in ("a", "b", "c", "d", "e")]}  # fmt: skip
RAPPOR = {"mechanism": "rappor", "k": 32, "h": 2, "m": 16, "f": 0.5, "p": 0.5, "q": 0.75}


def laplace_mse_tolerance(expected: float, m: int) -> float:
    return Z * math.sqrt(5.0 / m) * expected


# ---- Fourier marginals -------------------------------------------------------------------------


def test_fourier_gap_exact() -> None:
    m = mechanism_from_config(FOURIER)
    n = 100_000
    document = kind_gap(m, n)
    assert document["kind"] == "fourier" and document["central_tables"] == 10
    sigma = central_gaussian_sigma(1.0, 1e-6)
    for row in document["sizes"]:
        k = row["size"]
        holders = math.comb(5 - k, 2 - k)
        tables_laplace = 2 ** (2 - k) * 2 * (10 * 2 / 1.0) ** 2 / (holders * n**2)
        full_laplace = 2 ** (5 - k) * 2 * (2 / 1.0) ** 2 / n**2
        assert row["central_tables_laplace_cell_variance"] == pytest.approx(tables_laplace)
        assert row["central_full_laplace_cell_variance"] == pytest.approx(full_laplace)
        assert row["central_tables_gaussian_cell_variance"] == pytest.approx(
            2 ** (2 - k) * 10 * sigma**2 / (holders * n**2)
        )
        share = (2**k - 1) / 4**k  # 2^k - 1 coefficients, weights 2^-k
        coefficients_laplace = share * 2 * (15 * 2 / 1.0) ** 2 / n**2  # T = 15, Delta_1 = 2T
        assert row["central_coefficients_laplace_cell_variance"] == pytest.approx(
            coefficients_laplace
        )
        sigma_t = analytic_gaussian_sigma(1.0, 1e-6, 2 * math.sqrt(15))  # Delta_2 = 2 sqrt(T)
        assert row["central_coefficients_gaussian_cell_variance"] == pytest.approx(
            share * sigma_t**2 / n**2
        )
        best = min(tables_laplace, full_laplace, coefficients_laplace)
        assert row["central_laplace_cell_variance"] == pytest.approx(best)
        ldp = float(m.cell_variance(n, k, np.full(2**k, 2.0**-k)).mean())  # type: ignore[attr-defined]
        assert row["ldp_cell_variance"] == pytest.approx(ldp)
        assert row["variance_ratio"] == pytest.approx(ldp / row["central_laplace_cell_variance"])
    # add-remove halves Delta_1
    half = kind_gap(m, n, GapOptions(neighbouring="add-remove"))["sizes"][1]
    assert half["central_full_laplace_cell_variance"] == pytest.approx(
        document["sizes"][1]["central_full_laplace_cell_variance"] / 4
    )


def test_fourier_sum_down_keeps_the_asked_order() -> None:
    rng = np.random.default_rng(4)
    records = rng.integers(0, 2, (500, 4))
    holder = (0, 2, 3)
    table = _true_table(records, holder)[None]
    for attributes in [(3, 0), (2,), (0, 2, 3), (3, 2)]:
        assert _sum_down(table, holder, attributes)[0] == pytest.approx(
            _true_table(records, attributes)
        )


def test_fourier_gap_measured_against_its_exact_variances() -> None:
    m = mechanism_from_config(FOURIER)
    n = 5000
    ratios: dict[int, list[float]] = {1: [], 2: []}
    for seed in range(16):
        options = GapOptions(repetitions=4 if seed else 200)
        simulation = simulated_kind_gap(m, n, ZIPF, options, seed=seed)["simulation"]
        for row in simulation["sizes"]:
            ratios[row["size"]].append(row["ldp_raw_mse"] / row["ldp_expected"])
            assert row["ldp_consistent_mse"] <= row["ldp_raw_mse"] * 1.05
            if seed == 0:  # each way of the curator over 200 repetitions of every cell
                assert set(row["ways"]) == {
                    f"{way}_{noise}"
                    for way in ("tables", "full", "coefficients")
                    for noise in ("laplace", "gaussian")
                }
                cells = row["marginals"] * 2 ** row["size"] * 200
                for way in row["ways"].values():
                    expected = way["expected"]
                    assert abs(way["mse"] - expected) < laplace_mse_tolerance(expected, cells)
    for values in ratios.values():
        # cells of one marginal are dependent: at least 16 independent ratios
        assert abs(np.mean(values) - 1) < Z * math.sqrt(2 / 16)


def test_fourier_measured_gap_checks_the_truth() -> None:
    m = mechanism_from_config(FOURIER)
    rng = np.random.default_rng(1)
    records = rng.integers(0, 2, (300, 5))

    raw = estimate(m, m.perturb(records, rng=rng))
    with pytest.raises(ValueError, match="have 299 rows; the estimate has n=300"):
        measured_kind_gap(m, raw, records[:299])
    with pytest.raises(ValueError, match=r"values\[0, 0\] \(a\) must be 0 or 1"):
        measured_kind_gap(m, raw, records + 2)


# ---- means -----------------------------------------------------------------------------------


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
    n = 10_000
    document = kind_gap(m, n)
    epsilon = config["epsilon"]
    assert document["kind"] == "mean"
    assert document["l1_sensitivity"] == pytest.approx(l1)
    assert document["l2_sensitivity"] == pytest.approx(l2)
    assert document["central_laplace_variance"] == pytest.approx(2 * (l1 / epsilon) ** 2 / n**2)
    sigma = analytic_gaussian_sigma(epsilon, 1e-6, l2)
    assert document["central_gaussian_variance"] == pytest.approx(sigma**2 / n**2)
    worst = float(np.max(m.worst_case_variance())) / n  # type: ignore[attr-defined]
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
    ratios = []
    for seed in range(120):
        simulation = simulated_kind_gap(
            m, 1000, parse_simulation("lognormal"), GapOptions(repetitions=2), seed=seed
        )["simulation"]
        ratios.append(simulation["ldp_squared_error"] / simulation["ldp_expected"])
    dim = m.width  # type: ignore[attr-defined]
    # a vector's squared error averages its coordinates: at least 120 independent ratios
    assert abs(np.mean(ratios) - 1) < Z * math.sqrt(2 / 120), (dim, np.mean(ratios))
    wide = simulated_kind_gap(m, 1000, ZIPF, GapOptions(repetitions=400), seed=1)["simulation"]
    expected = wide["central_laplace_expected"]
    assert abs(wide["central_laplace_mse"] - expected) < laplace_mse_tolerance(expected, 400 * dim)


# ---- RAPPOR ----------------------------------------------------------------------------------


def test_rappor_gap_exact_and_measured() -> None:
    m = mechanism_from_config(RAPPOR)
    n = 20_000
    p2, q2 = (float(v) for v in m.report_probabilities)  # type: ignore[attr-defined]
    document = simulated_kind_gap(m, n, ZIPF, GapOptions(vocabulary=40, repetitions=400), seed=3)
    lone = p2 * (1 - p2) / ((q2 - p2) ** 2 * 2 * n)
    assert document["ldp_variance_lone_candidate"] == pytest.approx(lone)
    epsilon = m.privacy_epsilon
    assert document["epsilon_one"] == epsilon
    assert document["central_laplace_variance"] == pytest.approx(8 / (n * epsilon) ** 2)
    simulation = document["simulation"]
    assert simulation["candidates"] == 40 and simulation["ldp_false_discoveries"] <= 1
    expected = simulation["central_laplace_expected"]
    assert abs(simulation["central_laplace_mse"] - expected) < laplace_mse_tolerance(
        expected, 400 * 40
    )
    # the decoder's variances include shared bits and the cohort split: near the lone figure
    assert 0.8 < simulation["ldp_reported_variance"] / lone < 2.0
    assert simulation["ldp_mse"] > 1000 * simulation["central_laplace_mse"]


def test_rappor_measured_gap_needs_counts_summing_to_n() -> None:
    m = mechanism_from_config(RAPPOR)

    rng = np.random.default_rng(2)
    raw = estimate(m, m.simulate_clients(["a"] * 50 + ["b"] * 50, rng=rng), candidates=["a", "b"])  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="sum to 99; the estimate has n=100"):
        measured_kind_gap(m, raw, {"a": 50, "b": 49})


# ---- through the command ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "spec", "key"),
    [
        (FOURIER, "zipf", "sizes"),
        ({"mechanism": "laplace", "epsilon": 1, "lower": 0, "upper": 5}, "lognormal:0.5",
         "ldp_squared_error"),
        (RAPPOR, "uniform", "ldp_mse"),
    ],
)  # fmt: skip
def test_gap_command_covers_the_new_kinds(
    config: dict[str, Any], spec: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["gap", "--mechanism", json.dumps(config), "--n", "3000", "--vocabulary", "20"]
    assert main([*arguments, "--format", "json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    kind = mechanism_from_config(config).estimate_kind
    assert exact["kind"] == kind and "simulation" not in exact
    assert main([*arguments, "--simulate", spec, "--seed", "4"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["simulation"]["population"] == parse_simulation(spec).describe()
    assert key in document["simulation"]
    assert main([*arguments, "--format", "table"]) == 0
    assert "variance_ratio" in capsys.readouterr().out


def test_every_fourier_marginal_size_is_measured() -> None:
    m = mechanism_from_config({**FOURIER, "order": 3})
    document = simulated_kind_gap(m, 2000, ZIPF, GapOptions(repetitions=2), seed=0)
    sizes = [row["size"] for row in document["simulation"]["sizes"]]
    assert sizes == [1, 2, 3]
    assert [row["marginals"] for row in document["simulation"]["sizes"]] == [
        math.comb(5, k) for k in (1, 2, 3)
    ]
