"""Distributions of a number from Square Wave reports: EM with smoothing (EMS), CDF, quantiles.

Li, Wang, Lopuhaa-Zwakenberg, Li & Skoric, "Estimating numerical distributions under local
differential privacy", SIGMOD 2020 (docs/math/richer-data.md). EMS fits the distribution of the
grid points through the mechanism's exact channel (``SquareWave.channel``): an EM step (Agrawal &
Aggarwal, PODS 2001; the step of ``analysis.postprocess.em``), then a smoothing of theta with the
binomial kernel (1, 2, 1)/4 (ends (2, 1)/3) and a renormalisation (``square_wave.ems``, shared
with the collector's admin estimate), until the log-likelihood of all
reports gains less than ``tol`` (the authors' threshold, 1e-3). Smoothing biases the fit towards
smooth densities, which is what makes EMS accurate at small epsilon; there is no closed-form
variance, so the intervals of the histogram, the CDF and the quantiles are percentile intervals of
a seeded parametric bootstrap (draws from the fitted output distribution, each refitted by EMS).
They cover the sampling error only: EMS's smoothing bias (a few hundredths of the range in the
tails at eps = 2) is not in them, and dominates once n is in the hundreds of thousands.
The mean has an unbiased closed form with a standard error (``SquareWave.mean``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.square_wave import (
    EMS_TOLERANCE,
    SquareWave,
    ems,
    grid_cdf,
    grid_quantile,
    smooth,
    to_histogram,
)

__all__ = [
    "DEFAULT_REPLICATES",
    "DEFAULT_TOLERANCE",
    "DistributionEstimate",
    "ems",
    "estimate_distribution",
    "smooth",
    "to_histogram",
]

DEFAULT_TOLERANCE = EMS_TOLERANCE
DEFAULT_REPLICATES = 50


@dataclasses.dataclass(frozen=True)
class DistributionEstimate:
    """The distribution of a number estimated by EMS from Square Wave reports.

    ``histogram`` (bins,) sums to one over the equal buckets of [lower, upper]; ``grid`` is the
    fitted distribution of the N + 1 grid points (the resolution of ``cdf`` and ``quantile``);
    ``replicates`` holds the bootstrap refits of ``grid`` (replicates, N + 1) behind every
    interval (percentile intervals at ``confidence``). ``mean`` is the unbiased closed-form mean
    with its standard error and normal interval.
    """

    histogram: FloatArray
    histogram_low: FloatArray
    histogram_high: FloatArray
    grid: FloatArray
    replicates: FloatArray
    mean: float
    mean_std_error: float
    n: int
    confidence: float
    mechanism: dict[str, Any]
    iterations: int
    lower: float
    upper: float

    # ---- the CDF and quantiles of a grid distribution -----------------------------------------

    def _grid_cdf(self, theta: FloatArray, x: float) -> FloatArray:
        return grid_cdf(theta, x, self.lower, self.upper)

    def _grid_quantile(self, theta: FloatArray, q: float) -> FloatArray:
        return grid_quantile(theta, q, self.lower, self.upper)

    def _percentiles(self, samples: FloatArray) -> tuple[float, float]:
        if samples.size == 0:
            return math.nan, math.nan
        alpha = (1 - self.confidence) / 2
        low, high = np.quantile(samples, [alpha, 1 - alpha])
        return float(low), float(high)

    def cdf(self, x: float) -> float:
        """The estimated P[X <= x]."""
        return float(self._grid_cdf(self.grid, float(x)))

    def cdf_interval(self, x: float) -> tuple[float, float]:
        """The bootstrap percentile interval of ``cdf(x)``."""
        return self._percentiles(self._grid_cdf(self.replicates, float(x)))

    def quantile(self, q: float) -> float:
        """The estimated q-quantile (q in (0, 1))."""
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1); got {q!r}")
        return float(self._grid_quantile(self.grid, q))

    def quantile_interval(self, q: float) -> tuple[float, float]:
        """The bootstrap percentile interval of ``quantile(q)``."""
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1); got {q!r}")
        return self._percentiles(np.asarray(self._grid_quantile(self.replicates, q)))

    @property
    def mean_interval(self) -> tuple[float, float]:
        z = z_value(self.confidence)
        return self.mean - z * self.mean_std_error, self.mean + z * self.mean_std_error

    @property
    def bin_edges(self) -> FloatArray:
        return np.linspace(self.lower, self.upper, self.histogram.size + 1)

    # ---- DocumentedEstimate --------------------------------------------------------------------

    def to_dict(self, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> dict[str, Any]:
        edges = self.bin_edges
        return json_safe(
            {
                "n": self.n,
                "mechanism": self.mechanism,
                "confidence": self.confidence,
                "mean": {
                    "value": self.mean,
                    "std_error": self.mean_std_error,
                    "ci_low": self.mean_interval[0],
                    "ci_high": self.mean_interval[1],
                },
                "quantiles": [
                    {
                        "q": q,
                        "value": self.quantile(q),
                        "ci_low": self.quantile_interval(q)[0],
                        "ci_high": self.quantile_interval(q)[1],
                    }
                    for q in quantiles
                ],
                "histogram": [
                    {
                        "low": float(edges[i]),
                        "high": float(edges[i + 1]),
                        "frequency": float(self.histogram[i]),
                        "ci_low": float(self.histogram_low[i]),
                        "ci_high": float(self.histogram_high[i]),
                    }
                    for i in range(self.histogram.size)
                ],
                "postprocessing": "ems",
                "bootstrap_replicates": int(self.replicates.shape[0]),
            }
        )

    def format_table(self, quantiles: tuple[float, ...] = (0.5, 0.9, 0.99)) -> str:
        level = f"{100 * self.confidence:g}%"
        low, high = self.mean_interval
        lines = [
            f"n = {self.n}; EMS over {self.histogram.size} buckets; {level} intervals",
            f"mean {self.mean:.6g}  [{low:.6g}, {high:.6g}]",
            f"{'quantile':>10} {'value':>12} {'ci_low':>12} {'ci_high':>12}",
        ]
        for q in quantiles:
            ql, qh = self.quantile_interval(q)
            lines.append(f"{q:>10g} {self.quantile(q):>12.6g} {ql:>12.6g} {qh:>12.6g}")
        lines.append(f"{'bucket':>25} {'frequency':>10} {'ci_low':>10} {'ci_high':>10}")
        edges = self.bin_edges
        for i, f in enumerate(self.histogram):
            bucket = f"[{edges[i]:.4g}, {edges[i + 1]:.4g})"
            lines.append(
                f"{bucket:>25} {f:>10.4f} {self.histogram_low[i]:>10.4f} "
                f"{self.histogram_high[i]:>10.4f}"
            )
        return "\n".join(lines)


def estimate_distribution(
    mechanism: SquareWave,
    reports: ReportSource | AggregateStatistic,
    *,
    confidence: float = 0.95,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    tol: float = DEFAULT_TOLERANCE,
) -> DistributionEstimate:
    """EMS on the reports' output histogram, with a seeded parametric bootstrap."""
    statistic = aggregate(mechanism, reports)
    theta, iterations = mechanism.fit(statistic, tol=tol)
    maps = (mechanism.forward, mechanism.backward, mechanism.steps + 1)
    rng = np.random.default_rng(seed)
    if replicates > 0:
        fitted = mechanism.forward(theta)
        draws = rng.multinomial(statistic.n, fitted / fitted.sum(), size=replicates)
        boot, _ = ems(draws, *maps, tol=tol, initial=0.9 * theta + 0.1 / theta.size)
    else:
        boot = np.zeros((0, theta.size))
    histogram = to_histogram(theta, mechanism.bins)
    alpha = (1 - confidence) / 2
    if replicates > 0:
        boot_hist = to_histogram(boot, mechanism.bins)
        low, high = np.quantile(boot_hist, [alpha, 1 - alpha], axis=0)
    else:
        low = high = np.full(mechanism.bins, math.nan)
    return DistributionEstimate(
        histogram=histogram,
        histogram_low=np.asarray(low),
        histogram_high=np.asarray(high),
        grid=theta,
        replicates=boot,
        mean=mechanism.mean(statistic),
        mean_std_error=mechanism.mean_standard_error(statistic),
        n=statistic.n,
        confidence=confidence,
        mechanism=mechanism.to_config(),
        iterations=iterations,
        lower=mechanism.lower,
        upper=mechanism.upper,
    )
