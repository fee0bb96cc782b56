"""Distributions of a number from Square Wave reports: EM with smoothing (EMS), CDF, quantiles.

Li, Wang, Lopuhaa-Zwakenberg, Li & Skoric, "Estimating numerical distributions under local
differential privacy", SIGMOD 2020 (docs/math/richer-data.md). EMS fits the distribution of the
grid points through the mechanism's exact channel (``SquareWave.channel``): an EM step (Agrawal &
Aggarwal, PODS 2001; the step of ``analysis.postprocess.em``), then a smoothing of theta with the
binomial kernel (1, 2, 1)/4 (ends (2, 1)/3) and a renormalisation, until the log-likelihood of all
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
import numpy.typing as npt

from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from client_sdk.mechanisms.base import AggregateStatistic, ChannelMap, FloatArray
from client_sdk.mechanisms.square_wave import SquareWave

DEFAULT_TOLERANCE = 1e-3
DEFAULT_MAX_ITERATIONS = 3000
DEFAULT_REPLICATES = 50


def smooth(theta: FloatArray) -> FloatArray:
    """The binomial smoothing (1, 2, 1)/4 on the last axis (ends (2, 1)/3), renormalised."""
    out = 2.0 * theta
    out[..., 1:] += theta[..., :-1]
    out[..., :-1] += theta[..., 1:]
    out[..., 1:-1] /= 4.0
    out[..., [0, -1]] /= 3.0
    return np.asarray(out / out.sum(axis=-1, keepdims=True))


def ems(
    counts: npt.ArrayLike,
    forward: ChannelMap,
    backward: ChannelMap,
    inputs: int,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    initial: npt.ArrayLike | None = None,
    smoothing: bool = True,
) -> tuple[FloatArray, int]:
    """EM (with smoothing) for the input distributions of rows of output ``counts``.

    ``counts`` is (outputs,) or (rows, outputs); ``forward`` maps input distributions to output
    distributions (theta A) and ``backward`` maps functions of the outputs back (A r). Returns theta
    of shape (rows, inputs) (or (inputs,)) and the number of iterations. A row stops once its
    log-likelihood (summed over its reports) gains less than ``tol``.
    """
    observed = np.atleast_2d(np.asarray(counts, dtype=np.float64))
    rows = observed.shape[0]
    if initial is None:
        theta = np.full((rows, inputs), 1.0 / inputs)
    else:
        theta = np.broadcast_to(np.asarray(initial, dtype=np.float64), (rows, inputs)).copy()
    previous = np.full(rows, -math.inf)
    active = np.arange(rows)
    iterations = 0
    while active.size and iterations < max_iterations:
        iterations += 1
        t, obs = theta[active], observed[active]
        predicted = forward(t)
        t = t * backward(obs / np.maximum(predicted, 1e-300))
        t /= t.sum(axis=1, keepdims=True)
        if smoothing:
            t = smooth(t)
        theta[active] = t
        likelihood = np.sum(obs * np.log(np.maximum(forward(t), 1e-300)), axis=1)
        done = np.abs(likelihood - previous[active]) < tol
        previous[active] = likelihood
        active = active[~done]
    return (theta if np.ndim(counts) == 2 else theta[0]), iterations


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

    def _breakpoints(self, steps: int) -> FloatArray:
        """Where the CDF of a grid distribution has its kinks, in grid steps: grid point a's mass
        is spread uniformly over its cell [a - 1/2, a + 1/2] clipped to [0, N]."""
        return np.concatenate([[0.0], np.arange(steps) + 0.5, [float(steps)]])

    def _grid_cdf(self, theta: FloatArray, x: float) -> FloatArray:
        """P[X <= x], linear inside each grid cell (one value per row of theta)."""
        rows = np.atleast_2d(theta)
        steps = rows.shape[1] - 1
        u = (x - self.lower) / (self.upper - self.lower) * steps
        points = self._breakpoints(steps)
        cumulative = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)], 1)
        values = np.array([np.interp(u, points, c) for c in cumulative])
        return values if theta.ndim == 2 else values[0]

    def _grid_quantile(self, theta: FloatArray, q: float) -> FloatArray:
        """The smallest x with P[X <= x] >= q (one value per row of theta)."""
        rows = np.atleast_2d(theta)
        steps = rows.shape[1] - 1
        points = self._breakpoints(steps)
        out = np.empty(rows.shape[0])
        for i, row in enumerate(rows):
            cumulative = np.concatenate([[0.0], np.cumsum(row)])
            j = int(np.clip(np.searchsorted(cumulative, q, side="left"), 1, steps + 1))
            low, high = cumulative[j - 1], cumulative[j]
            share = 0.0 if high <= low else (q - low) / (high - low)
            out[i] = points[j - 1] + share * (points[j] - points[j - 1])
        values = self.lower + (self.upper - self.lower) * out / steps
        return values if theta.ndim == 2 else values[0]

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


def to_histogram(theta: FloatArray, bins: int) -> FloatArray:
    """Bucket masses from grid masses (N = bins * r steps): each half of grid point a's cell
    [a - 1/2, a + 1/2] goes to the bucket it lies in (the outer halves of the end points to the
    end buckets), so a point on a bucket edge counts half in each."""
    steps = theta.shape[-1] - 1
    r = steps // bins
    cells = np.repeat(np.arange(bins), r)  # grid cell [a - 1/2, a + 1/2] halves by position
    left = np.concatenate([[0], cells])  # bucket of the lower half of each grid point's cell
    right = np.concatenate([cells, [bins - 1]])  # bucket of its upper half
    out = np.zeros((*theta.shape[:-1], bins))
    for buckets in (left, right):
        onehot = np.zeros((steps + 1, bins))
        onehot[np.arange(steps + 1), buckets] = 0.5
        out += theta @ onehot
    return np.asarray(out)


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
    mechanism.check_statistic(statistic)
    maps = (mechanism.forward, mechanism.backward, mechanism.steps + 1)
    counts = np.asarray(statistic.counts, dtype=np.float64)
    theta, iterations = ems(counts, *maps, tol=tol)
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
