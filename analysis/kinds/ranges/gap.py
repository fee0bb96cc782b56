"""The central gap of range queries (hierarchical histograms; docs/math/central-and-shuffle.md).

Range queries [lo, hi) over k ordered items, on the frequency scale, n public. Exact on both
sides:

- **LDP**: the mechanism's exact fixed-population variance of the consistent range estimate
  (``Hierarchical.functional_variance`` of the range's weights over the nodes), at uniform leaf
  frequencies without the truth, at the true ones with it;
- **central, flat**: Laplace on each of the k counts (Delta_1 = 2 under ``replace``, 1 under
  ``add-remove``): Var = L 2 (Delta_1/epsilon)^2 / n^2 for a range of L items;
- **central, hierarchical**: Laplace on every node of the same B-ary tree (each user is in one
  node per level: Delta_1 = 2h, or h), made consistent by the same least-squares map as the LDP
  estimate (the best linear unbiased one for equal node variances, Hay, Rastogi, Miklau, Suciu,
  PVLDB 2010): Var = 2 (Delta_1/epsilon)^2 ||a||^2 / n^2, a the range's weights over the nodes.

The figures are averaged over ``RANGES`` ranges drawn uniformly (a fixed seed: the same ranges
every run) and given for a few lengths. Measured in simulation: the squared errors of those
ranges, and the quantiles.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.kinds._common.gap import (
    GapOptions,
    Simulation,
    laplace_sensitivity,
    require_kind,
    zipf_weights,
)
from analysis.kinds.ranges.estimate import RangeEstimate, estimate_ranges
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.hierarchical import Hierarchical, RangeMechanism

__all__ = ["RANGES", "exact_gap", "measured_gap", "query_ranges", "simulated_gap"]

RANGES = 400
QUANTILES = (0.5, 0.9, 0.99)
FloatArray = npt.NDArray[np.float64]


def _hierarchical(mechanism: Mechanism) -> RangeMechanism:
    return require_kind(mechanism, RangeMechanism, "a range mechanism")


def _central_tree(m: RangeMechanism) -> Hierarchical:
    """The curator's tree: the campaign's own B-ary tree, or a binary one for the Haar variant
    (its estimates are wavelet coefficients, not node counts)."""
    return m.node_tree()


def query_ranges(k: int) -> npt.NDArray[np.int64]:
    """(RANGES, 2) ranges [lo, hi), uniform over 0 <= lo < hi <= k, from a fixed seed."""
    ends = np.sort(np.random.default_rng(20201).integers(0, k + 1, size=(4 * RANGES, 2)), axis=1)
    ends = ends[ends[:, 0] < ends[:, 1]][:RANGES]
    return np.asarray(ends, dtype=np.int64)


def _weights(m: RangeMechanism, ranges: npt.NDArray[np.int64]) -> FloatArray:
    """Each range's weights over the nodes (rows of the consistency map summed)."""
    w, _ = m.consistency
    cumulative = np.concatenate([np.zeros((1, w.shape[1])), np.cumsum(w, axis=0)])
    return np.asarray(cumulative[ranges[:, 1]] - cumulative[ranges[:, 0]])


def _variances(
    m: RangeMechanism, ranges: npt.NDArray[np.int64], f: FloatArray, n: int, options: GapOptions
) -> dict[str, FloatArray]:
    a = _weights(m, ranges)
    central = _central_tree(m)
    a_central = _weights(central, ranges)
    b = laplace_sensitivity(options.neighbouring) / m.privacy_epsilon
    tree = central.height * b
    return {
        "ldp": np.asarray(m.functional_variance(a, f, n)),
        "central_flat": (ranges[:, 1] - ranges[:, 0]) * 2 * b * b / n**2,
        "central_hierarchical": 2 * tree * tree * np.sum(a_central * a_central, axis=1) / n**2,
    }


def _lengths(k: int) -> list[int]:
    return sorted({1, max(1, k // 16), max(1, k // 4), max(1, k // 2)})


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _hierarchical(mechanism)
    f = np.full(m.k, 1.0 / m.k)
    ranges = query_ranges(m.k)
    average = {name: float(np.mean(v)) for name, v in _variances(m, ranges, f, n, options).items()}
    by_length = []
    for length in _lengths(m.k):
        one = np.array([[0, length]], dtype=np.int64)
        variances = _variances(m, one, f, n, options)
        by_length.append({"length": length, **{k: float(v[0]) for k, v in variances.items()}})
    return {
        "variant": m.description,
        "branching": getattr(m, "b", None),
        "height": m.height,
        "ranges": int(ranges.shape[0]),
        "average_variance": average,
        "variance_ratio_to_best_central": average["ldp"]
        / min(average["central_flat"], average["central_hierarchical"]),
        "by_length": by_length,
        "exact": "every figure (LDP at uniform leaf frequencies)",
    }


def _central_leaves(
    m: RangeMechanism, counts: FloatArray, options: GapOptions, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """(flat, hierarchical) noisy leaf frequencies of the curator, ``repetitions`` rows each."""
    n = counts.sum()
    b = laplace_sensitivity(options.neighbouring) / m.privacy_epsilon
    flat = (counts + rng.laplace(0.0, b, (options.repetitions, m.k))) / n
    central = _central_tree(m)
    w, c = central.consistency
    nodes = central.design @ (counts / n)
    noisy_nodes = nodes + rng.laplace(
        0.0, central.height * b / n, (options.repetitions, nodes.size)
    )
    return flat, noisy_nodes @ w.T + c


def _quantile(f: FloatArray, q: float) -> int:
    cumulative = np.cumsum(np.maximum(f, 0.0))
    cumulative = cumulative / cumulative[-1] if cumulative[-1] > 0 else cumulative
    return min(int(np.searchsorted(cumulative, q - 1e-12, side="left")), f.size - 1)


def measured_gap(
    mechanism: Mechanism,
    estimate: RangeEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the true count of every item."""
    m = _hierarchical(mechanism)
    counts = np.asarray(truth, dtype=np.float64)
    n = estimate.n
    if counts.shape != (m.k,) or not np.isclose(counts.sum(), n):
        raise ValueError(f"the true counts must be k={m.k} counts summing to n={n}")
    f = counts / n
    ranges = query_ranges(m.k)
    exact = _variances(m, ranges, f, n, options)
    flat, tree = _central_leaves(m, counts, options, rng)

    def range_mse(leaves: FloatArray) -> float:
        rows = np.atleast_2d(leaves)
        cumulative = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, 1)], 1)
        sums = cumulative[:, ranges[:, 1]] - cumulative[:, ranges[:, 0]]
        true = np.concatenate([[0.0], np.cumsum(f)])
        return float(np.mean((sums - (true[ranges[:, 1]] - true[ranges[:, 0]])) ** 2))

    quantiles = []
    for q in QUANTILES:
        truth_q = _quantile(f, q)
        quantiles.append(
            {
                "q": q,
                "truth": truth_q,
                "ldp": estimate.quantile(q),
                "central_flat_mean_abs_error": float(
                    np.mean([abs(_quantile(row, q) - truth_q) for row in flat])
                ),
                "central_hierarchical_mean_abs_error": float(
                    np.mean([abs(_quantile(row, q) - truth_q) for row in tree])
                ),
            }
        )
    return {
        "range_mse": {
            "ldp": range_mse(estimate.frequencies),
            "ldp_expected": float(np.mean(exact["ldp"])),
            "central_flat": range_mse(flat),
            "central_flat_expected": float(np.mean(exact["central_flat"])),
            "central_hierarchical": range_mse(tree),
            "central_hierarchical_expected": float(np.mean(exact["central_hierarchical"])),
        },
        "quantiles": quantiles,
        "measured": True,
    }


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _hierarchical(mechanism)
    items = rng.choice(m.k, size=n, p=zipf_weights(m.k, simulation))
    estimate = estimate_ranges(m, m.perturb(items, rng=rng))
    return measured_gap(m, estimate, np.bincount(items, minlength=m.k), options, rng)
