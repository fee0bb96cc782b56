"""The central gap of Fourier-marginal campaigns (``fourier``; docs/math/central-and-shuffle.md).

The local campaign answers every marginal of up to ``order`` of its d binary attributes
(Cormode, Kulkarni & Srivastava, SIGMOD 2018). A trusted curator at the same epsilon answers the
same marginals from the true records in one of two ways, both exact:

- **tables**: it releases the contingency table of every one of the M = C(d, order) top-order
  attribute sets (2^order cells each) with Laplace noise on every cell. Replacing one user's
  record moves one cell of every table by -1 and another by +1, so Delta_1 = 2M (``replace``;
  M under ``add-remove``) and each cell gets Lap(Delta_1/epsilon), 2 (Delta_1/epsilon)^2 / n^2
  on the frequency scale. A cell of a k-way marginal is the sum of 2^(order-k) cells of a table
  holding it, averaged over the H = C(d-k, order-k) tables that hold it (independent noise):
  Var = 2^(order-k) 2 (Delta_1/epsilon)^2 / (H n^2). The analytic Gaussian (Balle & Wang 2018)
  takes Delta_2 = sqrt(2M) (sqrt(M)) with the same sums.
- **full**: it releases the full 2^d contingency table with Delta_1 = 2 (1); a k-way cell sums
  2^(d-k) cells: Var = 2^(d-k) 2 (Delta_1/epsilon)^2 / n^2 (Delta_2 = sqrt(2) or 1).

The better of the two is the central figure (``central_laplace_cell_variance``). The LDP cell
variance is the mechanism's exact fixed-population one (``Fourier.cell_variance``), at uniform
cells without the truth and at the true cells with it. Measured in simulation: records
perturbed by the mechanism, marginals estimated by ``analysis.fourier`` (raw and made
consistent), against the curator's noisy tables summed down and averaged (the ``tables`` way).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.fourier import FourierEstimate, estimate_fourier
from analysis.gap import (
    GapOptions,
    Simulation,
    central_gaussian_sigma,
    laplace_sensitivity,
    zipf_weights,
)
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.fourier import Fourier

__all__ = ["MAX_MEASURED", "central_variances", "exact_gap", "measured_gap", "simulated_gap"]

MAX_MEASURED = 200
"""At most this many marginals of each size are measured (the first in lexicographic order)."""

FloatArray = npt.NDArray[np.float64]


def _fourier(mechanism: Mechanism) -> Fourier:
    if not isinstance(mechanism, Fourier):
        raise ValueError(f"mechanism {mechanism.name!r} is not a Fourier-marginal mechanism")
    return mechanism


def _tables(m: Fourier) -> int:
    return math.comb(m.d, m.order)


def central_variances(m: Fourier, n: int, size: int, options: GapOptions) -> dict[str, float]:
    """Per-cell variances of a ``size``-way marginal for the curator's two ways (module
    docstring): ``tables_laplace``, ``tables_gaussian``, ``full_laplace``, ``full_gaussian``."""
    epsilon = m.privacy_epsilon
    tables = _tables(m)
    holders = math.comb(m.d - size, m.order - size)
    summed = 2.0 ** (m.order - size)
    unit = laplace_sensitivity(options.neighbouring) / epsilon  # Delta_1/epsilon of one table
    sigma = central_gaussian_sigma(epsilon, options.delta, options.neighbouring)
    return {
        "tables_laplace": summed * 2 * (tables * unit) ** 2 / (holders * n**2),
        "tables_gaussian": summed * tables * sigma**2 / (holders * n**2),
        "full_laplace": 2.0 ** (m.d - size) * 2 * unit**2 / n**2,
        "full_gaussian": 2.0 ** (m.d - size) * sigma**2 / n**2,
    }


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _fourier(mechanism)
    sizes = []
    for size in range(1, m.order + 1):
        cells = 1 << size
        ldp = float(m.cell_variance(n, size, np.full(cells, 1.0 / cells)).mean())
        central = central_variances(m, n, size, options)
        laplace = min(central["tables_laplace"], central["full_laplace"])
        gaussian = min(central["tables_gaussian"], central["full_gaussian"])
        sizes.append(
            {
                "size": size,
                "marginals": math.comb(m.d, size),
                "cells": cells,
                "ldp_cell_variance": ldp,
                "central_laplace_cell_variance": laplace,
                "central_gaussian_cell_variance": gaussian,
                "central_laplace_way": "tables" if laplace == central["tables_laplace"] else "full",
                **{f"central_{key}_cell_variance": value for key, value in central.items()},
                "variance_ratio": ldp / laplace,
                "gaussian_variance_ratio": ldp / gaussian,
            }
        )
    return {
        "d": m.d,
        "order": m.order,
        "coefficients": m.coefficients,
        "central_tables": _tables(m),
        "sizes": sizes,
        "exact": "LDP at uniform cells (Fourier.cell_variance); central Laplace and Gaussian on "
        f"all {_tables(m)} tables of {m.order} attributes (summed down, averaged over the "
        "tables holding each marginal) or on the full table of all "
        f"{m.d} attributes, whichever is smaller",
    }


def _true_table(records: npt.NDArray[np.int64], attributes: tuple[int, ...]) -> FloatArray:
    """Counts of a marginal's cells, row-major (the first attribute most significant)."""
    weights = 1 << np.arange(len(attributes) - 1, -1, -1)
    cells = records[:, list(attributes)] @ weights
    return np.bincount(cells, minlength=1 << len(attributes)).astype(np.float64)


def _sum_down(
    table: FloatArray, holder: tuple[int, ...], attributes: tuple[int, ...]
) -> FloatArray:
    """Cells (R, 2^o) of the table on ``holder`` summed to the marginal on ``attributes`` (R,
    2^k), its axes in the order of ``attributes``."""
    shaped = table.reshape((table.shape[0],) + (2,) * len(holder))
    keep = [1 + holder.index(a) for a in attributes]
    drop = tuple(axis for axis in range(1, len(holder) + 1) if axis not in keep)
    summed = shaped.sum(axis=drop) if drop else shaped
    remaining = [axis for axis in range(1, len(holder) + 1) if axis in keep]
    order = [0] + [1 + remaining.index(axis) for axis in keep]
    return np.asarray(summed.transpose(order).reshape(table.shape[0], -1))


def measured_gap(
    mechanism: Mechanism,
    estimate: FourierEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the (n, d) true records as 0/1 attribute values."""
    m = _fourier(mechanism)
    records = m.check_tuples(truth)
    n = estimate.n
    if records.shape[0] != n:
        raise ValueError(f"the true records have {records.shape[0]} rows; the estimate has n={n}")
    epsilon = m.privacy_epsilon
    top_sets = list(itertools.combinations(range(m.d), m.order))
    laplace_scale = len(top_sets) * laplace_sensitivity(options.neighbouring) / epsilon
    gaussian_sd = math.sqrt(len(top_sets)) * central_gaussian_sigma(
        epsilon, options.delta, options.neighbouring
    )
    shape = (options.repetitions, 1 << m.order)
    laplace_tables: dict[tuple[int, ...], FloatArray] = {}
    gaussian_tables: dict[tuple[int, ...], FloatArray] = {}
    for s in top_sets:
        counts = _true_table(records, s)
        laplace_tables[s] = (counts + rng.laplace(0.0, laplace_scale, shape)) / n
        gaussian_tables[s] = (counts + rng.normal(0.0, gaussian_sd, shape)) / n
    # The consistent cells without the bootstrap (its intervals are not measured here).
    plain = estimate_fourier(m, estimate.statistic, confidence=estimate.confidence, replicates=0)
    sizes = []
    for size in range(1, m.order + 1):
        chosen = list(itertools.islice(itertools.combinations(range(m.d), size), MAX_MEASURED))
        errors: dict[str, list[float]] = {
            key: []
            for key in ("raw", "consistent", "expected", "laplace", "gaussian", "ldp_abs", "abs")
        }
        for attributes in chosen:
            names = [m.names[a] for a in attributes]
            f = _true_table(records, attributes) / n
            raw = np.asarray(plain.raw_marginal(*names).frequencies).ravel()
            consistent = np.asarray(plain.marginal(*names).frequencies).ravel()
            holders = [s for s in top_sets if set(attributes) <= set(s)]
            laplace = np.mean([_sum_down(laplace_tables[s], s, attributes) for s in holders], 0)
            gaussian = np.mean([_sum_down(gaussian_tables[s], s, attributes) for s in holders], 0)
            errors["raw"].append(float(np.mean((raw - f) ** 2)))
            errors["consistent"].append(float(np.mean((consistent - f) ** 2)))
            errors["expected"].append(float(np.mean(m.cell_variance(n, size, f))))
            errors["laplace"].append(float(np.mean((laplace - f) ** 2)))
            errors["gaussian"].append(float(np.mean((gaussian - f) ** 2)))
            errors["ldp_abs"].append(float(np.mean(np.abs(consistent - f))))
            errors["abs"].append(float(np.mean(np.abs(laplace - f))))
        central = central_variances(m, n, size, options)
        sizes.append(
            {
                "size": size,
                "marginals": len(chosen),
                "ldp_raw_mse": float(np.mean(errors["raw"])),
                "ldp_expected": float(np.mean(errors["expected"])),
                "ldp_consistent_mse": float(np.mean(errors["consistent"])),
                "ldp_mean_absolute_error": float(np.mean(errors["ldp_abs"])),
                "central_laplace_mse": float(np.mean(errors["laplace"])),
                "central_laplace_expected": central["tables_laplace"],
                "central_gaussian_mse": float(np.mean(errors["gaussian"])),
                "central_gaussian_expected": central["tables_gaussian"],
                "central_laplace_mean_absolute_error": float(np.mean(errors["abs"])),
            }
        )
    return {
        "sizes": sizes,
        "measured": True,
        "repetitions": options.repetitions,
        "note": "LDP raw (unbiased) and consistent cells (analysis.fourier); ldp_expected is "
        "the exact variance of the raw cells at the true frequencies; the curator releases "
        f"all {len(top_sets)} top-order tables (Laplace and Gaussian), each marginal summed "
        f"down and averaged over its tables; at most {MAX_MEASURED} marginals of each size",
    }


def simulate_records(
    m: Fourier, n: int, simulation: Simulation, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Correlated 0/1 records: attribute 0 is 1 with the share of the simulation's second rank
    (zipf:1.1 gives 0.32; uniform 0.5); every other attribute copies attribute 0 with
    probability 1/2, else draws its own bit with the same share."""
    share = float(zipf_weights(2, simulation)[1])
    first = (rng.random(n) < share).astype(np.int64)
    columns = [first]
    for _ in range(1, m.d):
        own = (rng.random(n) < share).astype(np.int64)
        columns.append(np.where(rng.random(n) < 0.5, first, own))
    return np.stack(columns, axis=1)


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _fourier(mechanism)
    records = simulate_records(m, n, simulation, rng)
    estimate = estimate_fourier(m, m.perturb(records, rng=rng), replicates=0)
    return measured_gap(m, estimate, records, options, rng)
