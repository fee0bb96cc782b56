"""The sketch kind's gap against a central curator: the string kinds' comparison (top-k recall
and precision, detection thresholds; :mod:`analysis.kinds._common.items_gap`), the simulated
reports estimated against the simulated vocabulary as candidates."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.kinds._common.gap import GapOptions, Simulation, require_kind
from analysis.kinds._common.items_gap import exact_gap, measured_gap, simulated_items_gap
from analysis.kinds.sketch.estimate import estimate_sketch
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.sketch import StringSketch

__all__ = ["exact_gap", "measured_gap", "simulated_gap"]


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """:func:`~analysis.kinds._common.items_gap.simulated_items_gap` with the sketch estimate."""
    sketch = require_kind(mechanism, StringSketch, "a string sketch")
    return simulated_items_gap(
        sketch,
        n,
        simulation,
        options,
        rng,
        lambda reports, words: estimate_sketch(sketch, reports, words),
    )
