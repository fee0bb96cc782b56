"""The central gap of RAPPOR campaigns (analysis.kinds.rappor.gap).

Exact figures are checked against the formulas written out here; measured ones against their
exact expectations: the curator's Laplace noise over many repetitions (the mean squared error
of Laplace noise of variance V over m draws has standard deviation sqrt(5/m) V), and the local
estimate's squared error, averaged over fixed seeds, against its exact variance (a mean of m
chi-square(1)/1 ratios has standard deviation sqrt(2/m) when the errors are normal).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis import estimate
from analysis.gap import (
    GapOptions,
    measured_kind_gap,
    parse_simulation,
    simulated_kind_gap,
)
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.rappor import RAPPOR as RAPPOR_MECHANISM
from tests.analysis.gap_tolerance import laplace_mse_tolerance

ZIPF = parse_simulation("zipf")
RAPPOR = {"mechanism": "rappor", "k": 32, "h": 2, "m": 16, "f": 0.5, "p": 0.5, "q": 0.75}


def test_rappor_gap_exact_and_measured() -> None:
    m = mechanism_from_config(RAPPOR)
    assert isinstance(m, RAPPOR_MECHANISM)
    n = 20_000
    p2, q2 = (float(v) for v in m.report_probabilities)
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
    assert isinstance(m, RAPPOR_MECHANISM)

    rng = np.random.default_rng(2)
    raw = estimate(m, m.simulate_clients(["a"] * 50 + ["b"] * 50, rng=rng), candidates=["a", "b"])
    with pytest.raises(ValueError, match="sum to 99; the estimate has n=100"):
        measured_kind_gap(m, raw, {"a": 50, "b": 49})
