"""The discovery kind's gap against a central curator: the string kinds' comparison (top-k
recall and precision, detection thresholds; :mod:`analysis.kinds._common.items_gap`), the
simulated reports decoded by the mechanism's own discovery."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.kinds._common.gap import GapOptions, Simulation
from analysis.kinds._common.items_gap import exact_gap, measured_gap, simulated_items_gap
from analysis.kinds.discovery.estimate import discover
from client_sdk.mechanisms.base import Mechanism

__all__ = ["exact_gap", "measured_gap", "simulated_gap"]


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """:func:`~analysis.kinds._common.items_gap.simulated_items_gap` with the discovery (the
    vocabulary stays unknown to it)."""
    return simulated_items_gap(
        mechanism, n, simulation, options, rng, lambda reports, _words: discover(mechanism, reports)
    )
