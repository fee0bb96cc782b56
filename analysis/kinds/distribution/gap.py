"""The central gap of distributions of a number (Square Wave + EMS;
docs/math/central-and-shuffle.md).

A trusted curator releases the histogram of the true values over r = ``CENTRAL_REFINEMENT``
equal buckets per bucket of the report with Laplace noise (Delta_1 = 2 under ``replace``, 1
under ``add-remove``), clips it at zero and normalises it, and reads the CDF (linear inside each
bucket), the quantiles and the report's ``bins`` buckets (sums of r fine ones) from it. Exact
before the clipping: Var[report bucket] = 2 r b^2 / n^2 and Var[F(fine edge j)] =
2 j b^2 / n^2, b = Delta_1/epsilon.
EMS has no closed-form variance (analysis.kinds.distribution.estimate: its intervals are
bootstrap), so both models are **measured** in simulation: the Wasserstein-1 distance between the
estimated and the true CDF (over [lower, upper], on 2001 points), the mean squared error of the
bucket shares, and the error of the 50th, 90th and 99th percentiles; the curator's averaged over
``repetitions``.
"""

from __future__ import annotations

import math
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
from analysis.kinds.distribution.estimate import DistributionEstimate, estimate_distribution
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.square_wave import SquareWave

__all__ = ["QUANTILES", "exact_gap", "measured_gap", "simulated_gap"]

QUANTILES = (0.5, 0.9, 0.99)
POINTS = 2001
CENTRAL_REFINEMENT = 4
"""The curator's histogram has this many buckets per bucket of the report."""
FloatArray = npt.NDArray[np.float64]


def _square_wave(mechanism: Mechanism) -> SquareWave:
    return require_kind(mechanism, SquareWave, "a distribution mechanism")


def exact_gap(mechanism: Mechanism, n: int, options: GapOptions) -> dict[str, Any]:
    m = _square_wave(mechanism)
    b = laplace_sensitivity(options.neighbouring) / m.privacy_epsilon
    fine = 2 * b * b / n**2
    return {
        "bins": m.bins,
        "central_buckets": _fine(m),
        "central_laplace_bucket_variance": fine * CENTRAL_REFINEMENT,
        "central_laplace_cdf_variance_max": (_fine(m) - 1) * fine,
        "exact": "central only (before clipping); EMS has no closed form: --simulate measures both",
    }


def _fine(m: SquareWave) -> int:
    return CENTRAL_REFINEMENT * m.bins


def _histogram_cdf(shares: FloatArray, edges: FloatArray, x: FloatArray) -> FloatArray:
    """CDFs (rows) of bucket shares, linear inside each bucket."""
    rows = np.atleast_2d(shares)
    cumulative = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)], axis=1)
    return np.array([np.interp(x, edges, c) for c in cumulative])


def _histogram_quantile(shares: FloatArray, edges: FloatArray, q: float) -> FloatArray:
    rows = np.atleast_2d(shares)
    out = np.empty(rows.shape[0])
    for i, row in enumerate(rows):
        cumulative = np.concatenate([[0.0], np.cumsum(row)])
        out[i] = float(np.interp(q, cumulative, edges)) if cumulative[-1] > 0 else math.nan
    return out


def measured_gap(
    mechanism: Mechanism,
    estimate: DistributionEstimate,
    truth: npt.ArrayLike,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """``truth``: the users' true values."""
    m = _square_wave(mechanism)
    values = np.clip(np.asarray(truth, dtype=np.float64), m.lower, m.upper)
    n = estimate.n
    if values.size != n:
        raise ValueError(f"the truth has {values.size} values; the estimate has n={n}")
    edges = estimate.bin_edges
    x = np.linspace(m.lower, m.upper, POINTS)
    width = (m.upper - m.lower) / (POINTS - 1)
    true_cdf = np.searchsorted(np.sort(values), x, side="right") / n
    true_shares = np.histogram(values, bins=edges)[0] / n
    true_quantiles = np.quantile(values, QUANTILES)
    local_cdf = np.array([estimate.cdf(float(point)) for point in x])

    # The curator's histogram at CENTRAL_REFINEMENT times the report's resolution, summed to
    # the report's buckets for the bucket error.
    fine_edges = np.linspace(m.lower, m.upper, _fine(m) + 1)
    counts = np.histogram(values, bins=fine_edges)[0].astype(np.float64)
    b = laplace_sensitivity(options.neighbouring) / m.privacy_epsilon
    noisy = np.maximum(counts + rng.laplace(0.0, b, (options.repetitions, counts.size)), 0.0)
    fine = noisy / np.maximum(noisy.sum(axis=1, keepdims=True), 1e-300)
    shares = fine.reshape(options.repetitions, m.bins, -1).sum(axis=2)
    central_cdf = _histogram_cdf(fine, fine_edges, x)

    def w1(cdf: FloatArray) -> float:
        return float(np.mean(np.sum(np.abs(np.atleast_2d(cdf) - true_cdf), axis=1) * width))

    quantiles = []
    for q, true_value in zip(QUANTILES, true_quantiles, strict=True):
        central_q = _histogram_quantile(fine, fine_edges, q)
        quantiles.append(
            {
                "q": q,
                "truth": float(true_value),
                "ldp": estimate.quantile(q),
                "ldp_abs_error": abs(estimate.quantile(q) - float(true_value)),
                "central_laplace_mean_abs_error": float(np.mean(np.abs(central_q - true_value))),
            }
        )
    return {
        "wasserstein_1": {"ldp": w1(local_cdf), "central_laplace": w1(central_cdf)},
        "bucket_mse": {
            "ldp": float(np.mean((estimate.histogram - true_shares) ** 2)),
            "central_laplace": float(np.mean((shares - true_shares) ** 2)),
            "central_laplace_expected_before_clipping": 2 * b * b * CENTRAL_REFINEMENT / n**2,
        },
        "quantiles": quantiles,
        "range": m.upper - m.lower,
        "measured": True,
    }


def simulate_values(
    m: SquareWave, n: int, simulation: Simulation, rng: np.random.Generator
) -> FloatArray:
    """``lognormal[:SIGMA]``: median a fifth of the way up the range, clipped; ``zipf``/``uniform``:
    the buckets by the simulation's shares (bucket 0 the most frequent), uniform inside each."""
    span = m.upper - m.lower
    if simulation.family == "lognormal":
        assert simulation.parameter is not None
        raw = rng.lognormal(math.log(span / 5), simulation.parameter, n)
        return np.asarray(np.clip(m.lower + raw, m.lower, m.upper))
    buckets = rng.choice(m.bins, size=n, p=zipf_weights(m.bins, simulation))
    return np.asarray(m.lower + (buckets + rng.random(n)) * span / m.bins)


def simulated_gap(
    mechanism: Mechanism,
    n: int,
    simulation: Simulation,
    options: GapOptions,
    rng: np.random.Generator,
) -> dict[str, Any]:
    m = _square_wave(mechanism)
    values = simulate_values(m, n, simulation, rng)
    estimate = estimate_distribution(m, m.perturb(values, rng=rng), replicates=0)
    return measured_gap(m, estimate, values, options, rng)
