"""The epsilon floor (``MIN_EPSILON``): every registered mechanism's config refuses an epsilon
below it, naming the field and the floor, and at the floor builds, reports and estimates with
finite numbers (issue 21, item 9: campaigns at 5e-324 were created, then every estimate failed
and hybrid's mean on [0, 1] was -3.0e14)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from analysis.estimation import estimate
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms._validation import MIN_EPSILON
from client_sdk.mechanisms.registry import MECHANISMS
from tests.scaleout.shards import CONFIGS, RAPPOR_CANDIDATES, random_reports

WITH_EPSILON = {name: config for name, config in CONFIGS.items() if "epsilon" in config}
BELOW = (5e-324, 1e-300, math.nextafter(MIN_EPSILON, 0.0))


def at(config: dict[str, Any], epsilon: float) -> dict[str, Any]:
    out = {**config, "epsilon": epsilon}
    if "longitudinal" in out:
        out["longitudinal"] = {"epsilon_permanent": 2 * epsilon}
    return out


def test_every_registered_mechanism_with_an_epsilon_is_covered() -> None:
    assert set(MECHANISMS) - {"rappor"} <= set(WITH_EPSILON)  # rappor is set by f, p, q


@pytest.mark.parametrize("name", sorted(WITH_EPSILON))
@pytest.mark.parametrize("epsilon", BELOW)
def test_an_epsilon_below_the_floor_is_refused_naming_the_field_and_the_floor(
    name: str, epsilon: float
) -> None:
    with pytest.raises(ValueError, match=r"^epsilon must be at least 0\.0001: .*got "):
        mechanism_from_config(at(WITH_EPSILON[name], epsilon))


@pytest.mark.parametrize("name", sorted(WITH_EPSILON))
def test_at_the_floor_every_mechanism_estimates_finite_numbers(name: str) -> None:
    mechanism = mechanism_from_config(at(WITH_EPSILON[name], MIN_EPSILON))
    payloads = random_reports(mechanism, 2_000, np.random.default_rng(5))
    result = estimate(mechanism, mechanism.from_wire(payloads), candidates=RAPPOR_CANDIDATES)
    if hasattr(result, "to_dict"):
        json.dumps(result.to_dict(), allow_nan=False)  # raises on inf or NaN
    else:
        for field in ("frequencies", "std_errors", "mean", "std_error"):
            if hasattr(result, field):
                assert np.all(np.isfinite(np.asarray(getattr(result, field), dtype=float)))


def test_hybrid_at_the_floor_is_within_its_error_bars() -> None:
    """The -3.0e14 of the issue came from e**eps - 1 == 0 in floats; at the floor the mean is
    unbiased: within 4 standard errors of the truth (a 6e-5 chance of failing), over 5 seeds."""
    mechanism = mechanism_from_config(
        {"mechanism": "hybrid", "epsilon": MIN_EPSILON, "lower": 0.0, "upper": 1.0}
    )
    for seed in range(5):
        rng = np.random.default_rng(seed)
        values = rng.beta(2.0, 5.0, 20_000)
        result = estimate(mechanism, mechanism.perturb(values, rng=rng))
        mean, error = float(np.ravel(result.mean)[0]), float(np.ravel(result.std_errors)[0])
        assert math.isfinite(mean) and 0 < error < 1e5
        assert abs(mean - values.mean()) <= 4 * error, (seed, mean, error)
