"""The central gap of Fourier-marginal campaigns (``fourier``; docs/math/central-and-shuffle.md).

The local campaign answers every marginal of up to ``order`` of its d binary attributes
(Cormode, Kulkarni & Srivastava, SIGMOD 2018). A trusted curator at the same epsilon answers the
same marginals from the true records in one of three ways, each exact (the neighbours of this
project: one user's record replaced by any other, ``replace``; ``add-remove`` is given too):

- **tables**: it releases the contingency table of every one of the M = C(d, order) top-order
  attribute sets (2^order cells each) with Laplace noise on every cell. Replacing one record
  moves one cell of every table by -1 and another by +1, so Delta_1 = 2M (M under
  ``add-remove``), each cell gets Lap(Delta_1/epsilon), 2 (Delta_1/epsilon)^2 / n^2 on the
  frequency scale. A cell of a k-way marginal is the sum of 2^(order-k) cells of a table holding
  it, averaged over the H = C(d-k, order-k) tables that hold it (independent noise):
  Var = 2^(order-k) 2 (Delta_1/epsilon)^2 / (H n^2). The analytic Gaussian (Balle & Wang 2018)
  takes Delta_2 = sqrt(2M) (sqrt(M)) with the same sums.
- **full**: it releases the full 2^d contingency table with Delta_1 = 2 (1), Delta_2 = sqrt(2)
  (1); a k-way cell sums 2^(d-k) cells: Var = 2^(d-k) 2 (Delta_1/epsilon)^2 / n^2.
- **coefficients**: it releases the T Fourier coefficients' sums S_alpha = sum_i (-1)^(alpha.x_i)
  with noise, as Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar (PODS 2007) do centrally.
  Replacing one record moves every S_alpha by at most 2 (1 under ``add-remove``): Delta_1 = 2T,
  Delta_2 = 2 sqrt(T) (T, sqrt(T)). A k-way cell is 2^-k sum over the 2^k - 1 non-empty
  alpha inside it of +-theta_alpha: Var = (2^k - 1) 4^-k 2 (Delta_1/epsilon)^2 / n^2.

The smallest of the three is the central figure (``central_laplace_cell_variance``, and the
Gaussian's likewise). The LDP cell variance is the mechanism's exact fixed-population one
(``Fourier.cell_variance``), at uniform cells without the truth and at the true cells with it.
Measured in simulation: records perturbed by the mechanism, marginals estimated by
``analysis.kinds.fourier.estimate`` (raw and made consistent), against each way of the curator
run on the true records (the full table only up to ``MAX_FULL_ATTRIBUTES`` attributes).
"""

from __future__ import annotations

import itertools
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
from analysis.kinds.fourier.estimate import FourierEstimate, estimate_fourier
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.fourier import Fourier
from client_sdk.mechanisms.gaussian_calibration import analytic_gaussian_sigma

__all__ = [
    "MAX_FULL_ATTRIBUTES",
    "MAX_MEASURED",
    "WAYS",
    "central_variances",
    "exact_gap",
    "measured_gap",
    "simulate_records",
    "simulated_gap",
]

MAX_MEASURED = 200
"""At most this many marginals of each size are measured (the first in lexicographic order)."""
MAX_FULL_ATTRIBUTES = 16
"""The full table's way is measured up to this many attributes (2^d cells per repetition)."""

FloatArray = npt.NDArray[np.float64]


def _fourier(mechanism: Mechanism) -> Fourier:
    return require_kind(mechanism, Fourier, "a Fourier-marginal mechanism")


def _tables(m: Fourier) -> int:
    return math.comb(m.d, m.order)


WAYS = ("tables", "full", "coefficients")
"""The curator's ways of answering the marginals (module docstring)."""


def central_variances(m: Fourier, n: int, size: int, options: GapOptions) -> dict[str, float]:
    """Per-cell variances of a ``size``-way marginal for each way of the curator (module
    docstring): ``{way}_laplace`` and ``{way}_gaussian`` for each of :data:`WAYS`."""
    epsilon = m.privacy_epsilon
    tables, t = _tables(m), m.coefficients
    holders = math.comb(m.d - size, m.order - size)
    summed = 2.0 ** (m.order - size)
    unit = laplace_sensitivity(options.neighbouring)  # one count's move: 2 (replace) or 1
    sigma = central_gaussian_sigma(epsilon, options.delta, options.neighbouring)
    sigma_coefficients = analytic_gaussian_sigma(epsilon, options.delta, unit * math.sqrt(t))
    share = (2.0**size - 1) / 4.0**size
    return {
        "tables_laplace": summed * 2 * (tables * unit / epsilon) ** 2 / (holders * n**2),
        "tables_gaussian": summed * tables * sigma**2 / (holders * n**2),
        "full_laplace": 2.0 ** (m.d - size) * 2 * (unit / epsilon) ** 2 / n**2,
        "full_gaussian": 2.0 ** (m.d - size) * sigma**2 / n**2,
        "coefficients_laplace": share * 2 * (t * unit / epsilon) ** 2 / n**2,
        "coefficients_gaussian": share * sigma_coefficients**2 / n**2,
    }


def _best(central: dict[str, float], noise: str) -> str:
    return min(WAYS, key=lambda way: central[f"{way}_{noise}"])


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _fourier(mechanism)
    sizes = []
    for size in range(1, m.order + 1):
        cells = 1 << size
        ldp = float(m.cell_variance(n, size, np.full(cells, 1.0 / cells)).mean())
        central = central_variances(m, n, size, options)
        laplace_way, gaussian_way = _best(central, "laplace"), _best(central, "gaussian")
        laplace = central[f"{laplace_way}_laplace"]
        gaussian = central[f"{gaussian_way}_gaussian"]
        sizes.append(
            {
                "size": size,
                "marginals": math.comb(m.d, size),
                "cells": cells,
                "ldp_cell_variance": ldp,
                "central_laplace_cell_variance": laplace,
                "central_gaussian_cell_variance": gaussian,
                "central_laplace_way": laplace_way,
                "central_gaussian_way": gaussian_way,
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
        f"tables holding each marginal), on the full table of all {m.d} attributes, or on the "
        f"{m.coefficients} Fourier coefficients, whichever is smallest",
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


class _Curator:
    """The curator's three ways run on the true records, ``repetitions`` times each: noisy
    frequency-scale releases from which any marginal's cells are read (module docstring)."""

    def __init__(
        self,
        m: Fourier,
        records: npt.NDArray[np.int64],
        options: GapOptions,
        rng: np.random.Generator,
    ) -> None:
        self.m, self.n = m, records.shape[0]
        epsilon, unit = m.privacy_epsilon, laplace_sensitivity(options.neighbouring)
        sigma = central_gaussian_sigma(epsilon, options.delta, options.neighbouring)
        reps = options.repetitions
        self.top_sets = list(itertools.combinations(range(m.d), m.order))
        self.tables: dict[str, dict[tuple[int, ...], FloatArray]] = {"laplace": {}, "gaussian": {}}
        scale, sd = len(self.top_sets) * unit / epsilon, math.sqrt(len(self.top_sets)) * sigma
        for s in self.top_sets:
            counts = _true_table(records, s)
            shape = (reps, counts.size)
            self.tables["laplace"][s] = (counts + rng.laplace(0.0, scale, shape)) / self.n
            self.tables["gaussian"][s] = (counts + rng.normal(0.0, sd, shape)) / self.n
        self.full: dict[str, FloatArray] | None = None
        if m.d <= MAX_FULL_ATTRIBUTES:
            counts = _true_table(records, tuple(range(m.d)))
            shape = (reps, counts.size)
            self.full = {
                "laplace": (counts + rng.laplace(0.0, unit / epsilon, shape)) / self.n,
                "gaussian": (counts + rng.normal(0.0, sigma, shape)) / self.n,
            }
        t = m.coefficients
        sums = np.stack(
            [1.0 - 2.0 * m.parities(records, np.full(self.n, c)).sum() / self.n for c in range(t)]
        )
        sigma_coefficients = analytic_gaussian_sigma(epsilon, options.delta, unit * math.sqrt(t))
        shape = (reps, t)
        self.coefficients = {
            "laplace": sums + rng.laplace(0.0, t * unit / epsilon, shape) / self.n,
            "gaussian": sums + rng.normal(0.0, sigma_coefficients, shape) / self.n,
        }

    def cells(self, way: str, noise: str, attributes: tuple[int, ...]) -> FloatArray | None:
        """(R, 2^k) noisy cells of the marginal on ``attributes`` (None: not measured)."""
        if way == "tables":
            holders = [s for s in self.top_sets if set(attributes) <= set(s)]
            tables = self.tables[noise]
            return np.asarray(
                np.mean([_sum_down(tables[s], s, attributes) for s in holders], axis=0)
            )
        if way == "full":
            if self.full is None:
                return None
            return _sum_down(self.full[noise], tuple(range(self.m.d)), attributes)
        w, indices = self.m.marginal_matrix(attributes)
        theta = self.coefficients[noise][:, indices]
        return np.asarray(2.0 ** -len(attributes) + theta @ w.T)


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
    curator = _Curator(m, records, options, rng)
    # The consistent cells without the bootstrap (its intervals are not measured here).
    plain = estimate_fourier(m, estimate.statistic, confidence=estimate.confidence, replicates=0)
    runs = [(way, noise) for way in WAYS for noise in ("laplace", "gaussian")]
    sizes = []
    for size in range(1, m.order + 1):
        chosen = list(itertools.islice(itertools.combinations(range(m.d), size), MAX_MEASURED))
        errors: dict[str, list[float]] = {
            key: [] for key in ("raw", "consistent", "expected", "absolute", "central_absolute")
        }
        central_errors: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
        central = central_variances(m, n, size, options)
        best = _best(central, "laplace")
        for attributes in chosen:
            names = [m.names[a] for a in attributes]
            f = _true_table(records, attributes) / n
            raw = np.asarray(plain.raw_marginal(*names).frequencies).ravel()
            consistent = np.asarray(plain.marginal(*names).frequencies).ravel()
            errors["raw"].append(float(np.mean((raw - f) ** 2)))
            errors["consistent"].append(float(np.mean((consistent - f) ** 2)))
            errors["expected"].append(float(np.mean(m.cell_variance(n, size, f))))
            errors["absolute"].append(float(np.mean(np.abs(consistent - f))))
            for way, noise in runs:
                cells = curator.cells(way, noise, attributes)
                if cells is not None:
                    central_errors[way, noise].append(float(np.mean((cells - f) ** 2)))
                    if (way, noise) == (best, "laplace"):
                        errors["central_absolute"].append(float(np.mean(np.abs(cells - f))))
        row: dict[str, Any] = {
            "size": size,
            "marginals": len(chosen),
            "ldp_raw_mse": float(np.mean(errors["raw"])),
            "ldp_expected": float(np.mean(errors["expected"])),
            "ldp_consistent_mse": float(np.mean(errors["consistent"])),
            "ldp_mean_absolute_error": float(np.mean(errors["absolute"])),
        }
        for noise in ("laplace", "gaussian"):
            way = _best(central, noise)
            if not central_errors[way, noise]:  # the full table, not measured: the next best
                way = min(
                    (w for w in WAYS if central_errors[w, noise]),
                    key=lambda w: central[f"{w}_{noise}"],
                )
            row[f"central_{noise}_way"] = way
            row[f"central_{noise}_mse"] = float(np.mean(central_errors[way, noise]))
            row[f"central_{noise}_expected"] = central[f"{way}_{noise}"]
        if errors["central_absolute"]:
            row["central_laplace_mean_absolute_error"] = float(np.mean(errors["central_absolute"]))
        row["ways"] = {
            f"{way}_{noise}": {
                "mse": float(np.mean(central_errors[way, noise])),
                "expected": central[f"{way}_{noise}"],
            }
            for way, noise in runs
            if central_errors[way, noise]
        }
        sizes.append(row)
    return {
        "sizes": sizes,
        "measured": True,
        "repetitions": options.repetitions,
        "note": "LDP raw (unbiased) and consistent cells (analysis.kinds.fourier.estimate); "
        "ldp_expected is the exact variance of the raw cells at the true frequencies; the "
        "curator's best way for each noise beside the LDP (every way under 'ways'), over "
        f"{options.repetitions} runs; at most {MAX_MEASURED} marginals of each size",
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
