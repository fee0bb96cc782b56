"""The secure-aggregation (DAP, Prio3Sum) column of the mean gap (analysis.kinds.mean.gap).

The exact noise variance is checked against a closed form derived apart from the code (two
discrete Laplace draws of scale b = M/epsilon: 1/sinh^2(epsilon/(2M)), times the grid step
squared over n^2); the measured error of many seeded runs (random rounding on the devices, the
task's own noise sampler) against the exact expectation, within Z standard errors of the mean of
the squared errors (from their spread).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from analysis.gap import GapOptions, kind_gap
from analysis.kinds.mean.estimate import estimate_mean
from analysis.kinds.mean.gap import DAP_SUM_MAX_MEASUREMENT, measured_gap
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.numeric import NumericMechanism
from tests.analysis.gap_tolerance import Z

M = DAP_SUM_MAX_MEASUREMENT


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_secure_aggregation_of_a_mean_exact(epsilon: float) -> None:
    n, span = 50_000, 10.0
    m = mechanism_from_config({"mechanism": "laplace", "epsilon": epsilon, "lower": 0, "upper": 10})
    document = kind_gap(m, n, GapOptions())
    dap = document["secure_aggregation"]
    step = span / M
    assert dap["vdaf"] == {"type": "sum", "max_measurement": M}
    assert dap["noise_variance"] == pytest.approx(
        step**2 / math.sinh(epsilon / (2 * M)) ** 2 / n**2, rel=1e-9
    )
    assert dap["rounding_variance_at_most"] == pytest.approx(step**2 / (4 * n))
    # about twice the central Laplace curator's variance (Delta_1 = span under replace)
    ratio = dap["std_error_over_central_laplace"]
    assert ratio == pytest.approx(
        math.sqrt(dap["variance_at_most"] / document["central_laplace_variance"])
    )
    assert math.sqrt(2) < ratio < 2


def test_secure_aggregation_of_a_mean_measured() -> None:
    n, runs = 2000, 2000
    m = mechanism_from_config({"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 10})
    rng = np.random.default_rng(11)
    values = rng.uniform(0, 10, n)
    assert isinstance(m, NumericMechanism)
    estimate = estimate_mean(m, m.perturb(values, rng=rng))
    out = measured_gap(m, estimate, values, GapOptions(repetitions=runs), rng)
    expected = out["secure_aggregation_expected"]
    # the exact expectation: the noise's variance plus the rounding's at these values
    exact = kind_gap(m, n, GapOptions())["secure_aggregation"]
    assert exact["noise_variance"] < expected <= exact["variance_at_most"]
    # the error's kurtosis is at most 6 (one Laplace draw; the sum of two has 4.5, the rounding
    # adds a near-normal term), so the mean of 2000 squared errors has a relative standard error
    # of at most sqrt(5/2000) = 5%; one aggregator's noise alone would be 50% below
    tolerance = Z * math.sqrt(5.0 / runs) * expected
    assert abs(out["secure_aggregation_mse"] - expected) < tolerance


def test_secure_aggregation_of_a_vector_mean_is_not_compared() -> None:
    config: dict[str, Any] = {"mechanism": "duchi", "epsilon": 2.0, "lower": -1, "upper": 1}
    vector = mechanism_from_config({**config, "dim": 4})
    dap = kind_gap(vector, 1000, GapOptions())["secure_aggregation"]
    assert dap["applies"] is False and "SumVec" in dap["reason"]
