"""The string kinds' simulated gap (analysis/kinds/_common/items_gap.py) for memoized mechanisms:
each simulated user is a new device (its first report), as the frequencies kind does."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.gap import GapOptions, Simulation, simulated_kind_gap
from client_sdk import mechanism_from_config

LONGITUDINAL = {"longitudinal": {"epsilon_permanent": 6.0}}

# The longitudinal configs of conformance/vectors/{cms,pem,sfp}.json.
CONFIGS: dict[str, dict[str, Any]] = {
    "cms": {"mechanism": "cms", "epsilon": 4.0, "hashes": 4, "m": 64, "max_length": 16, "seed": 0},
    "pem": {
        "mechanism": "pem",
        "epsilon": 4.0,
        "final_weight": 1,
        "g": 56,
        "max_length": 4,
        "start_bits": 7,
        "step_bits": 4,
    },
    "sfp": {
        "mechanism": "sfp",
        "epsilon": 4.0,
        "fragment_blocks": 9,
        "fragment_share": 0.75,
        "hashes": 4,
        "m": 256,
        "max_length": 8,
        "seed": 0,
    },
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_simulate_runs_memoized_string_mechanisms(name: str) -> None:
    """``ldp-analyze gap --simulate`` on a longitudinal string mechanism used to fail with
    "perturb needs permanent=<keyed source>"; now each user reports as a new device, and the
    most frequent word of a steep Zipf population (about 60% of users) is recovered."""
    mechanism = mechanism_from_config({**CONFIGS[name], **LONGITUDINAL})
    options = GapOptions(top=1, vocabulary=8)
    document = simulated_kind_gap(mechanism, 4000, Simulation("zipf", 2.0), options, seed=3)
    simulation = document["simulation"]
    assert simulation["vocabulary"] == 8
    assert simulation["top_k"]["local"]["recall"] == 1.0
