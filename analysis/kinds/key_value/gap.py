"""The central gap of key-value campaigns (PCKV; docs/math/central-and-shuffle.md).

Each user holds at most l = ``padding`` (key, value) pairs, values in [-1, 1]. A trusted curator
releases per key the count c_k of holders and the sum s_k of their values, half the budget each:
replacing one user changes at most 2l counts by one and the sums by at most 2l in all
(``replace``; l and l under ``add-remove``), so each gets Laplace noise of scale
b = 2 Delta/epsilon with Delta = 2l (l). Exact: Var[f_k] = 2 b^2 / n^2. The mean m_k = s_k / c_k
has the delta-method variance 2 b^2 (1 + m_k^2) / (n f_k)^2, measured in simulation beside it.

The LDP side: the frequency's exact fixed-population variance (``PCKV.frequency_variance``; at
f = 0 without the truth, the variance of a key nobody holds), and the mean's delta-method
standard error of ``analysis.kinds.key_value.estimate`` (measured in simulation; it has no
closed form in the true values alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    laplace_sensitivity,
    require_kind,
    zipf_weights,
)
from analysis.kinds.key_value.estimate import KeyValueEstimate, estimate_key_value
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.pckv import PCKV

__all__ = ["exact_gap", "measured_gap", "simulated_gap"]


def _pckv(mechanism: Mechanism) -> PCKV:
    return require_kind(mechanism, PCKV, "a key-value mechanism")


def central_scale(m: PCKV, options: GapOptions) -> float:
    """Laplace scale of each count and each sum (half the budget each)."""
    sensitivity = m.padding * laplace_sensitivity(options.neighbouring)
    return 2 * sensitivity / m.privacy_epsilon


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _pckv(mechanism)
    b = central_scale(m, options)
    ldp = float(m.frequency_variance(n, np.zeros(1))[0])
    central = 2 * b * b / n**2
    return {
        "padding": m.padding,
        "frequency": {
            "ldp_variance_at_zero": ldp,
            "central_laplace_variance": central,
            "variance_ratio": ldp / central,
        },
        "mean": {
            "central_laplace_variance_formula": "2 b^2 (1 + m^2) / (n f)^2",
            "central_laplace_scale": b,
        },
        "exact": "frequency variances; the means need the truth (--simulate)",
    }


def _truth_arrays(m: PCKV, records: Sequence[Mapping[int, float]]) -> tuple[np.ndarray, ...]:
    counts = np.zeros(m.k)
    sums = np.zeros(m.k)
    for record in records:
        for key, value in record.items():
            counts[key] += 1
            sums[key] += value
    return counts, sums


def measured_gap(
    mechanism: Mechanism,
    estimate: KeyValueEstimate,
    truth: Sequence[Mapping[int, float]],
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: every user's true record (key -> value)."""
    m = _pckv(mechanism)
    n = estimate.n
    if len(truth) != n:
        raise ValueError(f"the truth has {len(truth)} records; the estimate has n={n}")
    counts, sums = _truth_arrays(m, truth)
    frequencies = counts / n
    held = counts > 0
    means = np.where(held, sums / np.maximum(counts, 1), 0.0)
    b = central_scale(m, options)
    shape = (options.repetitions, m.k)
    noisy_counts = counts + rng.laplace(0.0, b, shape)
    noisy_sums = sums + rng.laplace(0.0, b, shape)
    central_means = np.clip(noisy_sums / np.maximum(noisy_counts, 1.0), -1.0, 1.0)
    delta_method = 2 * b * b * (1 + means**2) / np.maximum(counts, 1.0) ** 2
    return {
        "frequency": {
            "ldp_mse": float(np.mean((estimate.frequencies - frequencies) ** 2)),
            "ldp_expected": float(np.mean(m.frequency_variance(n, frequencies))),
            "central_laplace_mse": float(np.mean((noisy_counts / n - frequencies) ** 2)),
            "central_laplace_expected": 2 * b * b / n**2,
        },
        "mean": {
            "keys": int(held.sum()),
            "ldp_mse": float(np.mean((estimate.means[held] - means[held]) ** 2)),
            "ldp_mean_std_error": float(np.mean(estimate.mean_std_errors[held])),
            "central_laplace_mse": float(np.mean((central_means[:, held] - means[held]) ** 2)),
            "central_laplace_delta_method": float(np.mean(delta_method[held])),
        },
        "measured": True,
    }


def simulate_records(
    m: PCKV, n: int, simulation: Simulation, rng: np.random.Generator
) -> list[dict[int, float]]:
    """Each user holds 1 to ``padding`` distinct keys drawn by the simulation's shares; key k's
    values are normal around a key-specific mean in [-0.8, 0.8] (sd 0.2), clipped to [-1, 1]."""
    shares = zipf_weights(m.k, simulation)
    centres = rng.permutation(np.linspace(-0.8, 0.8, m.k))
    sizes = rng.integers(1, m.padding + 1, size=n)
    draws = rng.choice(m.k, size=(n, 4 * m.padding + 4), p=shares)
    records = []
    for size, row in zip(sizes, draws, strict=True):
        keys = list(dict.fromkeys(row.tolist()))[: int(size)]
        values = np.clip(centres[keys] + rng.normal(0.0, 0.2, len(keys)), -1.0, 1.0)
        records.append({int(k): float(v) for k, v in zip(keys, values, strict=True)})
    return records


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _pckv(mechanism)
    records = simulate_records(m, n, simulation, rng)
    estimate = estimate_key_value(m, m.perturb(records, rng=rng))
    return measured_gap(m, estimate, records, options, rng)
