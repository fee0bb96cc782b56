"""The utility gap of any estimate kind: what a trusted central curator at the same epsilon
would give (docs/math/central-and-shuffle.md).

Each kind answers through its own ``gap.py`` (``analysis/kinds/<kind>/gap.py``, the
:class:`analysis.kinds.Kind`'s ``exact_gap``, ``simulated_gap`` and ``measured_gap``);
:func:`kind_gap`, :func:`simulated_kind_gap` and :func:`measured_kind_gap` dispatch on
``Mechanism.estimate_kind`` through :data:`analysis.kinds.KINDS` and wrap the figures in the
document every kind shares. The histogram baselines, options and simulated populations the kinds
read are :mod:`analysis.kinds._common.gap`'s, re-exported here as the package's names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.kinds import KINDS, Kind
from analysis.kinds._common.gap import (
    DEFAULT_DELTA,
    NEIGHBOURING,
    EmpiricalGap,
    GapOptions,
    Simulation,
    UtilityGap,
    central_gaussian_sigma,
    central_gaussian_variance,
    central_laplace_variance,
    empirical_gap,
    error_curve,
    gap_document,
    laplace_sensitivity,
    ldp_variance,
    parse_simulation,
    require_kind,
    run_central_gaussian,
    run_central_laplace,
    users_needed,
    utility_gap,
    zipf_weights,
)
from client_sdk.mechanisms._validation import check_int
from client_sdk.mechanisms.base import Mechanism

__all__ = [
    "DEFAULT_DELTA",
    "NEIGHBOURING",
    "EmpiricalGap",
    "GapOptions",
    "Simulation",
    "UtilityGap",
    "central_gaussian_sigma",
    "central_gaussian_variance",
    "central_laplace_variance",
    "empirical_gap",
    "error_curve",
    "gap_kind",
    "kind_gap",
    "laplace_sensitivity",
    "ldp_variance",
    "measured_kind_gap",
    "parse_simulation",
    "require_kind",
    "run_central_gaussian",
    "run_central_laplace",
    "simulated_kind_gap",
    "users_needed",
    "utility_gap",
    "zipf_weights",
]


def gap_kind(mechanism: Mechanism) -> Kind:
    """The :class:`Kind` of the mechanism's ``estimate_kind``, whose gap functions answer."""
    kind = getattr(mechanism, "estimate_kind", None)
    if kind not in KINDS:
        raise ValueError(
            f"mechanism {mechanism.name!r} (estimate kind {kind!r}) has no central comparison: "
            "the gap covers frequency oracles and the estimate kinds "
            f"{', '.join(sorted(set(KINDS) - {'frequencies'}))}"
        )
    return KINDS[kind]


def kind_gap(mechanism: Mechanism, n: int, options: GapOptions | None = None) -> dict[str, Any]:
    """The exact central comparison of any estimate kind (:data:`analysis.kinds.KINDS`)."""
    n = check_int(n, "n", minimum=1)
    options = options or GapOptions()
    return gap_document(mechanism, n, gap_kind(mechanism).exact_gap(mechanism, n, options))


def simulated_kind_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions | None = None,
    *,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Both models measured on one simulated population (numpy's generator seeded by ``seed``
    perturbs the reports: a simulation of devices, not devices), beside the exact figures."""
    n = check_int(n, "n", minimum=1)
    options = options or GapOptions()
    kind = gap_kind(mechanism)
    rng = np.random.default_rng(seed)
    document = gap_document(mechanism, n, kind.exact_gap(mechanism, n, options))
    document["simulation"] = {
        "population": simulation.describe(),
        "seed": seed,
        **kind.simulated_gap(mechanism, n, simulation, options, rng),
    }
    return document


def measured_kind_gap(
    mechanism: Mechanism,
    estimate: Any,
    truth: Any,
    options: GapOptions | None = None,
    *,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Both models' errors for an estimate whose truth is known (the kind's truth: true counts
    by item or by string, the true values, the true tables)."""
    options = options or GapOptions()
    kind = gap_kind(mechanism)
    return dict(kind.measured_gap(mechanism, estimate, truth, options, np.random.default_rng(seed)))
