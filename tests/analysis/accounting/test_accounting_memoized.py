"""The device account of memoized mechanisms: one permanent response per distinct value."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.accounting import device_privacy
from client_sdk import mechanism_from_config

MEMOIZED_GRR = {
    "mechanism": "grr",
    "epsilon": 1.0,
    "k": 6,
    "longitudinal": {"epsilon_permanent": 2.0},
}


@pytest.mark.parametrize(
    ("config", "per_value"),
    [
        (MEMOIZED_GRR, 2.0),
        ({"mechanism": "dbitflip", "epsilon": 1.0, "k": 5, "d": 2}, None),
        ({"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 10}, 1.0),
    ],
)
def test_memoized_reports_cost_one_permanent_response_per_distinct_value(
    config: dict[str, Any], per_value: float | None
) -> None:
    mechanism = mechanism_from_config(config)
    inf = float(getattr(mechanism, "epsilon_inf"))  # noqa: B009
    if per_value is not None:
        assert inf == pytest.approx(per_value)
    # A thousand reports of three distinct values cost three permanent responses, never more
    # than basic composition of them, and less than a thousand fresh reports would.
    three = device_privacy(config, 1000, distinct_values=3)
    assert three.epsilon_at(1e-9) <= 3 * inf + 1e-9
    assert three.epsilon_at(0.0) == pytest.approx(3 * inf, rel=1e-9)
    one = device_privacy(config, 1000, distinct_values=1)
    assert one.epsilon_at(0.0) == pytest.approx(inf, rel=1e-9)
    worst = device_privacy(config, 1000)  # every report a new value
    assert worst.epsilon_at(1e-6) > three.epsilon_at(1e-6)


def test_the_permanent_stage_of_a_longitudinal_oracle_is_its_inner_mechanism() -> None:
    memoized = device_privacy(MEMOIZED_GRR, 10, distinct_values=2)
    plain = device_privacy({"mechanism": "grr", "epsilon": 2.0, "k": 6}, 2)
    assert memoized.epsilon_at(1e-6) == pytest.approx(plain.epsilon_at(1e-6), rel=1e-9)
