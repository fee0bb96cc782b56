"""The central gap of Fourier-marginal campaigns (analysis.kinds.fourier.gap).

Exact figures are checked against the formulas written out here; measured ones against their
exact expectations: the curator's Laplace noise over many repetitions (the mean squared error
of Laplace noise of variance V over m draws has standard deviation sqrt(5/m) V), and the local
estimate's squared error, averaged over fixed seeds, against its exact variance (a mean of m
chi-square(1)/1 ratios has standard deviation sqrt(2/m) when the errors are normal).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import estimate
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
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma
from tests.analysis.gap_tolerance import Z, laplace_mse_tolerance

ZIPF = parse_simulation("zipf")
FOURIER = {"mechanism": "fourier", "epsilon": 1.0, "order": 2,
           "attributes": [{"name": n} for n in ("a", "b", "c", "d", "e")]}  # fmt: skip


def test_fourier_gap_exact() -> None:
    m = mechanism_from_config(FOURIER)
    assert isinstance(m, Fourier)
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
        ldp = float(m.cell_variance(n, k, np.full(2**k, 2.0**-k)).mean())
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
    assert isinstance(m, Fourier)
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
    assert isinstance(m, Fourier)
    rng = np.random.default_rng(1)
    records = rng.integers(0, 2, (300, 5))

    raw = estimate(m, m.perturb(records, rng=rng))
    with pytest.raises(ValueError, match="have 299 rows; the estimate has n=300"):
        measured_kind_gap(m, raw, records[:299])
    with pytest.raises(ValueError, match=r"values\[0, 0\] \(a\) must be 0 or 1"):
        measured_kind_gap(m, raw, records + 2)


def test_every_fourier_marginal_size_is_measured() -> None:
    m = mechanism_from_config({**FOURIER, "order": 3})
    document = simulated_kind_gap(m, 2000, ZIPF, GapOptions(repetitions=2), seed=0)
    sizes = [row["size"] for row in document["simulation"]["sizes"]]
    assert sizes == [1, 2, 3]
    assert [row["marginals"] for row in document["simulation"]["sizes"]] == [
        math.comb(5, k) for k in (1, 2, 3)
    ]
