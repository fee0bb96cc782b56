"""Square Wave reporting (Li, Wang, Lopuhaa-Zwakenberg, Li & Skoric, SIGMOD 2020), on a grid.

The paper maps v in [0, 1] to a report on [-b, 1 + b] with density p on the window
[v - b, v + b] and q = p / e^eps elsewhere, where

    b = (eps e^eps - e^eps + 1) / (2 e^eps (e^eps - 1 - eps)),   p = e^eps / (2 b e^eps + 1),

and the server recovers the whole distribution of v by EM with smoothing (EMS). Here the same
channel lives on integers, exactly like the piecewise mechanism of this package
(``piecewise.PiecewiseKernel``, whose sampler, exact levels and privacy check it reuses):

* the input is clipped to [lower, upper] and snapped by randomized rounding to a grid point
  a in {0, ..., N}, with N = bins * resolution steps (resolution = ceil(1024 / bins), so the grid
  EMS works on has at least 1024 steps, as in the paper);
* outputs are j in {0, ..., N + W - 1}; the window of a is {a, ..., a + W - 1} with
  W = max(1, round(2 b N)) (the paper's window width 2b in units of the input range);
* with probability P_in = W e^eps / (W e^eps + N), rounded down to a 64-bit threshold, the output
  is uniform on the window, otherwise uniform on the N other outputs: the two levels differ by
  at most e^eps, so every row of the (N + 1) x (N + W) channel is epsilon-LDP against every other
  (``channel_matrices`` enumerates it; rounding only mixes rows).

The server side keeps the histogram of the N + W outputs (a mergeable statistic); EMS
(:func:`ems`, :meth:`SquareWave.fit`) fits the distribution of the grid points through the exact
channel, and the mean has an unbiased closed form from the same histogram
(E[j | a] = slope a + kappa). The fit, the bucket histogram, the CDF and quantiles of a grid
distribution live here so that the collector's admin estimate and
``analysis.kinds.distribution.estimate`` (which adds the bootstrap intervals) compute them one way.
docs/math/richer-data.md has the derivations.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import parse_int_payloads, widest_int
from client_sdk.mechanisms.base import (
    SUMMARY_QUANTILES,
    AggregateStatistic,
    ChannelMap,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
    normal_z,
)
from client_sdk.mechanisms.numeric_checks import check_bounds, check_scalar_values
from client_sdk.mechanisms.piecewise import PiecewiseKernel
from client_sdk.randomness import RandomSource

EMS_GRID = 1024
"""The least number of grid steps EMS works on (the paper's 1024 buckets)."""
MAX_BINS = 4096
MAX_ENUMERATED_OUTPUTS = 1 << 13
"""``channel_matrices`` enumerates grids with at most this many outputs."""
EMS_TOLERANCE = 1e-3
"""EMS stops once the log-likelihood of all reports gains less than this (the authors' value)."""
EMS_MAX_ITERATIONS = 3000


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
    tol: float = EMS_TOLERANCE,
    max_iterations: int = EMS_MAX_ITERATIONS,
    initial: npt.ArrayLike | None = None,
    smoothing: bool = True,
) -> tuple[FloatArray, int]:
    """EM (with smoothing) for the input distributions of rows of output ``counts``.

    ``counts`` is (outputs,) or (rows, outputs); ``forward`` maps input distributions to output
    distributions (theta A) and ``backward`` maps functions of the outputs back (A r). Returns theta
    of shape (rows, inputs) (or (inputs,)) and the number of iterations. A row stops once its
    log-likelihood (summed over its reports) gains less than ``tol``. The EM step is Agrawal &
    Aggarwal's (PODS 2001), the smoothing Li et al.'s EMS (SIGMOD 2020).
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


def _breakpoints(steps: int) -> FloatArray:
    """Where the CDF of a grid distribution has its kinks, in grid steps: grid point a's mass
    is spread uniformly over its cell [a - 1/2, a + 1/2] clipped to [0, N]."""
    return np.concatenate([[0.0], np.arange(steps) + 0.5, [float(steps)]])


def grid_cdf(theta: FloatArray, x: float, lower: float, upper: float) -> FloatArray:
    """P[X <= x] of grid distributions on [lower, upper], linear inside each grid cell (one value
    per row of theta)."""
    rows = np.atleast_2d(theta)
    steps = rows.shape[1] - 1
    u = (x - lower) / (upper - lower) * steps
    points = _breakpoints(steps)
    cumulative = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)], 1)
    values = np.array([np.interp(u, points, c) for c in cumulative])
    return values if theta.ndim == 2 else values[0]


def grid_quantile(theta: FloatArray, q: float, lower: float, upper: float) -> FloatArray:
    """The smallest x with P[X <= x] >= q (one value per row of theta)."""
    rows = np.atleast_2d(theta)
    steps = rows.shape[1] - 1
    points = _breakpoints(steps)
    cumulative = np.concatenate([np.zeros((rows.shape[0], 1)), np.cumsum(rows, axis=1)], 1)
    j = np.clip((cumulative < q).sum(axis=1), 1, steps + 1)  # first index with cumulative >= q
    index = np.arange(rows.shape[0])
    low, high = cumulative[index, j - 1], cumulative[index, j]
    share = np.where(high <= low, 0.0, (q - low) / np.where(high <= low, 1.0, high - low))
    out = points[j - 1] + share * (points[j] - points[j - 1])
    values = lower + (upper - lower) * out / steps
    return values if theta.ndim == 2 else values[0]


def square_wave_b(epsilon: float) -> float:
    """The paper's half-width b(eps) that maximises the mutual information (Li et al. 2020)."""
    e = math.exp(epsilon)
    return (epsilon * e - e + 1) / (2 * e * (e - 1 - epsilon))


@dataclasses.dataclass(frozen=True)
class SquareWaveKernel(PiecewiseKernel):
    """The piecewise kernel's integer construction with the Square Wave window W = round(2bN)."""

    @cached_property
    def window(self) -> int:
        return max(1, round(2 * square_wave_b(self.epsilon) * self.steps))


@dataclasses.dataclass(frozen=True)
class SquareWave(Mechanism):
    """Square Wave on [lower, upper], estimating the distribution on ``bins`` equal buckets.

    Config: ``{"mechanism": "square_wave", "epsilon", "lower", "upper", "bins"}``.
    """

    name: ClassVar[str] = "square_wave"
    value_kind: ClassVar[Literal["category", "number", "string"]] = "number"
    estimate_kind: ClassVar[str] = "distribution"
    longitudinal_refusal: ClassVar[str] = (
        "a number has no finite domain to key permanent responses by (every distinct value "
        "would get a fresh one): repeated reports compose and the ledger charges each"
    )

    epsilon: float
    lower: float
    upper: float
    bins: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        lower, upper = check_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(self, "bins", check_int(self.bins, "bins", minimum=2, maximum=MAX_BINS))

    # ---- geometry ----------------------------------------------------------------------------

    @property
    def resolution(self) -> int:
        """Grid steps per bucket."""
        return max(1, -(-EMS_GRID // self.bins))

    @property
    def steps(self) -> int:
        """N: grid steps over [lower, upper]; the grid points are 0..N."""
        return self.bins * self.resolution

    @cached_property
    def kernel(self) -> SquareWaveKernel:
        return SquareWaveKernel(self.epsilon, self.steps)

    @property
    def output_size(self) -> int:
        return self.kernel.output_size

    def grid_values(self) -> FloatArray:
        """The value of each grid point 0..N."""
        return np.asarray(
            self.lower + (self.upper - self.lower) * np.arange(self.steps + 1) / self.steps
        )

    def to_unit(self, values: FloatArray) -> FloatArray:
        mid, half = (self.lower + self.upper) / 2, (self.upper - self.lower) / 2
        return np.asarray(np.clip((values - mid) / half, -1.0, 1.0))

    # ---- device side -------------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """One output in [0, N + W) per value (values are clipped to [lower, upper])."""
        return self.kernel.sample(rng, self.to_unit(check_scalar_values(values)))

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return widest_int(0, self.output_size)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, self.output_size, "output")

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.output_size, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        outputs = np.asarray(reports, dtype=np.int64).reshape(-1)
        if outputs.size and (outputs.min() < 0 or outputs.max() >= self.output_size):
            raise ValueError(f"square_wave outputs must be in [0, {self.output_size})")
        return AggregateStatistic(np.bincount(outputs, minlength=self.output_size), outputs.size)

    def check_statistic(self, statistic: AggregateStatistic) -> None:
        if statistic.counts.shape != (self.output_size,):
            raise ValueError(
                f"statistic of shape {statistic.counts.shape} is not one of square_wave "
                f"(expected ({self.output_size},))"
            )
        if statistic.n <= 0:
            raise ValueError("cannot estimate a distribution from zero reports")

    def channel(self) -> FloatArray:
        """The exact (N + 1) x (N + W) channel: row a is P[output | grid point a]."""
        p_high, p_low = (float(v) for v in self.kernel.levels)
        outputs = np.arange(self.output_size)
        starts = np.arange(self.steps + 1)[:, None]
        inside = (outputs >= starts) & (outputs < starts + self.kernel.window)
        return np.where(inside, p_high, p_low)

    def forward(self, theta: FloatArray) -> FloatArray:
        """theta @ channel() on the last axis in O(N) per row: a level plus window sums."""
        p_high, p_low = (float(v) for v in self.kernel.levels)
        w = self.kernel.window
        prefix = np.concatenate(
            [np.zeros((*theta.shape[:-1], 1)), np.cumsum(theta, axis=-1)], axis=-1
        )
        # output j sees inputs j - W < a <= j: prefix[min(j, N) + 1] - prefix[max(j - W + 1, 0)]
        lead = prefix.shape[:-1]
        top = np.concatenate([prefix[..., 1:], np.repeat(prefix[..., -1:], w - 1, axis=-1)], -1)
        bottom = np.concatenate([np.zeros((*lead, w - 1)), prefix[..., : self.steps + 1]], -1)
        window = top - bottom
        return np.asarray(p_low * prefix[..., -1:] + (p_high - p_low) * window)

    def backward(self, r: FloatArray) -> FloatArray:
        """channel() @ r on the last axis in O(N) per row."""
        p_high, p_low = (float(v) for v in self.kernel.levels)
        w = self.kernel.window
        prefix = np.concatenate([np.zeros((*r.shape[:-1], 1)), np.cumsum(r, axis=-1)], axis=-1)
        window = prefix[..., w : w + self.steps + 1] - prefix[..., : self.steps + 1]
        return np.asarray(p_low * prefix[..., -1:] + (p_high - p_low) * window)

    def fit(
        self,
        statistic: AggregateStatistic,
        *,
        tol: float = EMS_TOLERANCE,
        initial: npt.ArrayLike | None = None,
    ) -> tuple[FloatArray, int]:
        """EMS on the output histogram: (grid-point distribution (N + 1,), iterations)."""
        self.check_statistic(statistic)
        counts = np.asarray(statistic.counts, dtype=np.float64)
        return ems(counts, self.forward, self.backward, self.steps + 1, tol=tol, initial=initial)

    def output_estimates(self) -> FloatArray:
        """The unbiased estimate of the value that each output stands for (E = the grid value)."""
        mid, half = (self.lower + self.upper) / 2, (self.upper - self.lower) / 2
        return np.asarray(mid + half * self.kernel.decode(np.arange(self.output_size)))

    def mean(self, statistic: AggregateStatistic) -> float:
        """The unbiased mean of the clipped values: the average of ``output_estimates``."""
        self.check_statistic(statistic)
        counts = np.asarray(statistic.counts, dtype=np.float64)
        return float(counts @ self.output_estimates() / statistic.n)

    def mean_standard_error(self, statistic: AggregateStatistic) -> float:
        """sqrt(s^2 / n), s^2 the sample variance of the per-report estimates (conservative for a
        fixed population, like the numeric mechanisms' ``"empirical"`` errors)."""
        self.check_statistic(statistic)
        n = statistic.n
        if n < 2:
            return math.inf
        counts = np.asarray(statistic.counts, dtype=np.float64)
        centred = self.output_estimates() - (self.lower + self.upper) / 2
        s1, s2 = float(counts @ centred), float(counts @ (centred * centred))
        return math.sqrt(max(s2 - s1 * s1 / n, 0.0) / (n - 1) / n)

    def mean_variance(self, values: Any) -> FloatArray:
        """The exact variance of one report's estimate, for each true value."""
        half = (self.upper - self.lower) / 2
        return np.asarray(half**2 * self.kernel.variance(self.to_unit(check_scalar_values(values))))

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """The EMS histogram and quantiles (Li et al. 2020) with the closed-form mean and its
        normal interval; no bootstrap here (``ldp-analyze estimate`` adds its intervals)."""
        theta, iterations = self.fit(statistic)
        histogram = to_histogram(theta, self.bins)
        edges = np.linspace(self.lower, self.upper, self.bins + 1)
        mean = self.mean(statistic)
        std_error = self.mean_standard_error(statistic)
        z = normal_z(confidence)
        return {
            "postprocessing": "ems",
            "mean": {
                "value": mean,
                "std_error": std_error,
                "ci_low": mean - z * std_error,
                "ci_high": mean + z * std_error,
            },
            "quantiles": [
                {"q": q, "value": float(grid_quantile(theta, q, self.lower, self.upper))}
                for q in SUMMARY_QUANTILES
            ],
            "histogram": [
                {"low": float(edges[i]), "high": float(edges[i + 1]), "frequency": float(f)}
                for i, f in enumerate(histogram)
            ],
            "ems_iterations": iterations,
            "intervals": "bootstrap intervals of the histogram and quantiles: ldp-analyze estimate",
        }

    # ---- privacy -----------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def implemented_epsilon(self) -> float:
        """ln(p_hi / p_lo) from the integer threshold (at most epsilon)."""
        return self.kernel.implemented_epsilon()

    def channel_matrices(self) -> Iterator[FloatArray]:
        if self.output_size > MAX_ENUMERATED_OUTPUTS:
            raise ValueError(f"{self.output_size} outputs are too many to enumerate")
        yield self.channel()
