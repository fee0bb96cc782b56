"""The central gap of multi-attribute campaigns: marginal tables (docs/math/central-and-shuffle.md).

The local campaign releases one table per unit of the mechanism (each attribute's 1-way
marginal, or with ``marginals`` each chosen table). A trusted curator releases the same tables
from the true records with Laplace noise on every cell: one user moves one cell of every table,
so the T tables together have Delta_1 = 2T under ``replace`` (T under ``add-remove``) and each
cell gets Lap(Delta_1/epsilon), Var = 2 (Delta_1/epsilon)^2 / n^2 on the frequency scale; the
analytic Gaussian takes Delta_2 = sqrt(2T) (sqrt(T)). Both exact.

The LDP cell variance is the mechanism's exact fixed-population one (``Multi.variance``) at
uniform cell frequencies without the truth (exact at the true frequencies with it). Measured in
simulation: records perturbed by the mechanism, tables estimated by
``analysis.kinds.multi.estimate`` (made consistent, so slightly below the raw variance), against the
curator's noisy true tables.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    central_gaussian_sigma,
    laplace_sensitivity,
    require_kind,
    zipf_weights,
)
from analysis.kinds.multi.estimate import MultiEstimate, estimate_multi
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.multi import Multi

__all__ = ["exact_gap", "measured_gap", "simulated_gap", "true_table"]


def _multi(mechanism: Mechanism) -> Multi:
    return require_kind(mechanism, Multi, "a multi-attribute mechanism")


def _central(m: Multi, n: int, options: GapOptions) -> tuple[float, float]:
    """Per-cell (Laplace, Gaussian) variances of the curator's T tables on the frequency scale."""
    tables = len(m.units)
    laplace_scale = tables * laplace_sensitivity(options.neighbouring) / m.privacy_epsilon
    sigma = central_gaussian_sigma(m.privacy_epsilon, options.delta, options.neighbouring)
    return 2 * laplace_scale**2 / n**2, tables * sigma**2 / n**2


def _names(m: Multi, unit: tuple[int, ...]) -> list[str]:
    return [m.names[a] for a in unit]


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _multi(mechanism)
    laplace, gaussian = _central(m, n, options)
    tables = []
    for j, unit in enumerate(m.units):
        cells = m.sizes[j]
        ldp = float(np.mean(m.variance(n, j, np.full(cells, 1.0 / cells))))
        tables.append(
            {
                "attributes": _names(m, unit),
                "cells": cells,
                "ldp_cell_variance": ldp,
                "central_laplace_cell_variance": laplace,
                "central_gaussian_cell_variance": gaussian,
                "variance_ratio": ldp / laplace,
            }
        )
    return {
        "protocol": m.protocol,
        "tables": tables,
        "exact": "LDP at uniform cell frequencies (Multi.variance); central Laplace and Gaussian "
        f"with the sensitivity of all {len(m.units)} tables",
    }


def true_table(m: Multi, records: npt.NDArray[np.int64], j: int) -> npt.NDArray[np.float64]:
    """The true frequencies of unit j's cells (row-major over its attributes)."""
    cells = np.bincount(m.unit_values(records, j), minlength=m.sizes[j]).astype(np.float64)
    return cells / records.shape[0]


def measured_gap(
    mechanism: Mechanism,
    estimate: MultiEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the (n, d) true records as attribute indices."""
    m = _multi(mechanism)
    records = np.asarray(truth, dtype=np.int64)
    n = estimate.n
    if records.shape != (n, m.d):
        raise ValueError(f"the true records have shape {records.shape}; expected ({n}, {m.d})")
    laplace_variance, gaussian_variance = _central(m, n, options)
    laplace_scale = math.sqrt(laplace_variance / 2)
    gaussian_sd = math.sqrt(gaussian_variance)
    tables = []
    for j, unit in enumerate(m.units):
        truth_j = true_table(m, records, j)
        names = _names(m, unit)
        local = np.asarray(estimate.marginal(*names).frequencies, dtype=np.float64).ravel()
        shape = (options.repetitions, truth_j.size)
        laplace = truth_j + rng.laplace(0.0, laplace_scale, shape)
        gaussian = truth_j + rng.normal(0.0, gaussian_sd, shape)
        tables.append(
            {
                "attributes": names,
                "ldp_mse": float(np.mean((local - truth_j) ** 2)),
                "ldp_expected": float(np.mean(m.variance(n, j, truth_j))),
                "ldp_mean_absolute_error": float(np.mean(np.abs(local - truth_j))),
                "central_laplace_mse": float(np.mean((laplace - truth_j) ** 2)),
                "central_laplace_expected": laplace_variance,
                "central_gaussian_mse": float(np.mean((gaussian - truth_j) ** 2)),
                "central_gaussian_expected": gaussian_variance,
                "central_laplace_mean_absolute_error": float(np.mean(np.abs(laplace - truth_j))),
            }
        )
    return {
        "tables": tables,
        "measured": True,
        "note": "LDP tables after consistency (analysis.kinds.multi.estimate); ldp_expected is the "
        "exact variance of the raw cells at the true frequencies",
    }


def simulate_records(
    m: Multi, n: int, simulation: Simulation, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Correlated records: attribute 0 from the simulation's shares; every other attribute copies
    attribute 0's rank (modulo its k) with probability 1/2, else draws its own rank."""
    first = rng.choice(m.ks[0], size=n, p=zipf_weights(m.ks[0], simulation))
    columns = [first]
    for k in m.ks[1:]:
        own = rng.choice(k, size=n, p=zipf_weights(k, simulation))
        columns.append(np.where(rng.random(n) < 0.5, first % k, own))
    return np.stack(columns, axis=1).astype(np.int64)


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _multi(mechanism)
    records = simulate_records(m, n, simulation, rng)
    estimate = estimate_multi(m, m.perturb(records, rng=rng))
    return measured_gap(m, estimate, records, options, rng)
