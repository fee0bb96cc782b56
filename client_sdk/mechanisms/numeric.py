"""The base of the numeric mechanisms: scalars on [lower, upper] and vectors, for mean estimation.

Every numeric mechanism is unbiased report by report: ``estimates(reports)`` maps each report to
a value whose expectation is the (clipped) true value, so the mean over n reports is unbiased
with variance (1/n^2) sum_i Var_i (docs/math/numeric.md). What aggregates is therefore the
same for all of them, per coordinate: the sum and the sum of squares of those per-report
estimates (centred on a fixed point of the input range, so that the sum of squares does not
cancel catastrophically), and how many reports carried the coordinate. That statistic merges by
addition (docs/architecture.md).

Inputs: a 1-D array of floats for scalar mechanisms, an (n, dim) array for vector ones. Values
outside the declared bounds are clipped to them (a box [lower, upper] per coordinate, or the L2
ball of radius ``clip_norm`` for the vector Gaussian); NaN and infinities are refused with a
``ValueError`` naming the index.

Helpers live apart: input checks in ``numeric_checks``, the grid and randomized rounding in
``grid``, the integer wire formats in ``_wire``.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_int
from client_sdk.mechanisms._wire import (
    parse_coordinate_pairs,
    parse_int_payloads,
    widest_int,
)
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
    normal_z,
)
from client_sdk.mechanisms.numeric_checks import (
    MAX_DIM,
    check_bounds,
    check_scalar_values,
    check_vector_values,
)
from client_sdk.randomness import RandomSource, sample_subsets

IntArray = npt.NDArray[np.int64]


# ---- the base class ------------------------------------------------------------------------


class NumericMechanism(Mechanism):
    """A mechanism whose reports estimate a real value (or vector) without bias.

    Subclasses implement the device side (``perturb``), the wire, and three pieces of server
    math: ``estimates`` (per-report unbiased estimates, in the value's units), ``variance`` (the
    exact per-report variance as a function of the true value) and ``worst_case_variance`` (its
    maximum over the input domain). Aggregation, the mean and its error are shared here.
    """

    epsilon: float

    value_kind: ClassVar[Literal["category", "number", "string"]] = "number"
    estimate_kind: ClassVar[str] = "mean"

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    # ---- shape -------------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def value_shape(self) -> tuple[int, ...]:
        """``()`` for a scalar mechanism, ``(dim,)`` for a vector one."""

    @property
    def width(self) -> int:
        """Coordinates per value: 1 for scalars, ``dim`` for vectors."""
        return self.value_shape[0] if self.value_shape else 1

    @property
    @abc.abstractmethod
    def center(self) -> FloatArray:
        """A fixed point of the input domain per coordinate; the statistic is centred on it."""

    # ---- server side -------------------------------------------------------------------------

    @abc.abstractmethod
    def estimates(self, reports: Reports) -> FloatArray:
        """Per-report unbiased estimates of the clipped true values: shape (n,) or (n, dim)."""

    @abc.abstractmethod
    def variance(self, values: Any) -> FloatArray:
        """The exact variance of ``estimates`` of one report, for each true value.

        ``values`` has the shape ``perturb`` takes (values outside the bounds count as clipped);
        the result has the same shape.
        """

    @abc.abstractmethod
    def worst_case_variance(self) -> FloatArray:
        """The maximum of ``variance`` over the input domain, per coordinate: shape (width,)."""

    def coverage(self, reports: Reports) -> IntArray:
        """How many of ``reports`` carry each coordinate (all of them, unless coordinates are
        sampled): shape (width,)."""
        return np.full(self.width, len(reports), dtype=np.int64)

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros((3, self.width), dtype=np.float64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Per coordinate: sum and sum of squares of (estimate - center), and the coverage."""
        n = len(reports)
        if n == 0:
            return self.empty_statistic()
        centred = self.estimates(reports).reshape(n, self.width) - self.center
        counts = np.stack(
            [
                centred.sum(axis=0),
                np.square(centred).sum(axis=0),
                self.coverage(reports).astype(np.float64),
            ]
        )
        return AggregateStatistic(counts, n)

    def _check_statistic(self, statistic: AggregateStatistic) -> None:
        if statistic.counts.shape != (3, self.width):
            raise ValueError(
                f"statistic of shape {statistic.counts.shape} is not one of {self.name} "
                f"(expected (3, {self.width}))"
            )
        if statistic.n <= 0:
            raise ValueError("cannot estimate a mean from zero reports")

    def mean(self, statistic: AggregateStatistic) -> FloatArray:
        """The unbiased mean of the clipped values, per coordinate: center + sum / n."""
        self._check_statistic(statistic)
        return np.asarray(self.center + statistic.counts[0] / statistic.n, dtype=np.float64)

    def empirical_variance(self, statistic: AggregateStatistic) -> FloatArray:
        """The sample variance s^2 of the per-report estimates, per coordinate (n >= 2).

        For independent reports with means t_i, E[s^2] = mean_i Var_i + sum_i (t_i - tbar)^2/(n-1):
        exactly the per-report variance when all users hold one value, an unbiased estimate of
        n Var[mean] in the i.i.d. model, and conservative for a fixed population.
        """
        self._check_statistic(statistic)
        n = statistic.n
        if n < 2:
            raise ValueError("the empirical variance needs at least two reports")
        s1, s2 = statistic.counts[0], statistic.counts[1]
        return np.asarray(np.maximum(s2 - s1 * s1 / n, 0.0) / (n - 1), dtype=np.float64)

    def worst_case_standard_errors(self, n: int) -> FloatArray:
        """sqrt(max_x Var(x) / n): a data-free bound on the mean's error for n reports."""
        if n <= 0:
            raise ValueError(f"n must be positive; got {n!r}")
        return np.asarray(np.sqrt(self.worst_case_variance() / n), dtype=np.float64)

    def standard_errors(self, statistic: AggregateStatistic) -> tuple[FloatArray, str]:
        """The standard errors of ``mean`` and how they were obtained, per coordinate.

        ``"empirical"``: sqrt(s^2/n) with s^2 = ``empirical_variance`` (n >= 2), which needs no
        knowledge of the users' values; ``"worst_case"``: ``worst_case_standard_errors`` when a
        single report leaves no sample variance. The collector and ``analysis`` both use this.
        """
        self._check_statistic(statistic)
        n = statistic.n
        if n >= 2:
            return np.sqrt(self.empirical_variance(statistic) / n), "empirical"
        return self.worst_case_standard_errors(n), "worst_case"

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """The unbiased :meth:`mean` (sums of per-report unbiased estimates), its
        :meth:`standard_errors` with normal intervals at ``confidence``, and the worst-case
        standard errors beside them; a scalar for a scalar value, a list for a vector."""
        mean = self.mean(statistic)
        std_errors, method = self.standard_errors(statistic)
        worst = self.worst_case_standard_errors(statistic.n)
        z = normal_z(confidence)

        def shaped(values: Any) -> Any:
            array = np.asarray(values, dtype=np.float64)
            return array.tolist() if self.value_shape else float(array.reshape(-1)[0])

        return {
            "mean": shaped(mean),
            "std_error": shaped(std_errors),
            "ci_low": shaped(mean - z * std_errors),
            "ci_high": shaped(mean + z * std_errors),
            "worst_case_std_error": shaped(worst),
            "variance_method": method,
        }


# ---- bounded mechanisms built from a kernel on [-1, 1] ----------------------------------------


class UnitKernel(Protocol):
    """A one-dimensional epsilon-LDP randomizer of t in [-1, 1] with integer outputs."""

    @property
    def epsilon(self) -> float:
        """The epsilon the kernel is built for."""

    @property
    def output_size(self) -> int:
        """Outputs are the integers in [0, output_size)."""

    def sample(self, rng: RandomSource | None, t: FloatArray) -> IntArray:
        """One output per t (vectorized)."""

    def decode(self, outputs: IntArray) -> FloatArray:
        """The unbiased estimate of t that each output stands for."""

    def variance(self, t: FloatArray) -> FloatArray:
        """The exact variance of ``decode(sample(t))``."""

    def implemented_epsilon(self) -> float:
        """max over outputs and inputs of the log ratio of implemented output probabilities."""

    def output_distribution(self, t: float) -> FloatArray:
        """P[output | t] over all outputs, as implemented (for exact checks and tests)."""


WORST_CASE_GRID = np.unique(np.concatenate([np.linspace(-1.0, 1.0, 2001), [0.0]]))
"""Inputs (on [-1, 1]) over which ``worst_case_variance`` maximizes the exact formula; the
formulas here are extremal at 0 or at the ends, which the grid contains."""


class BoundedMechanism(NumericMechanism):
    """Scalars on [lower, upper], or vectors in the box [lower, upper]^dim, through a kernel.

    A value x is clipped to the bounds and mapped to t = (x - mid)/half in [-1, 1]; the kernel's
    unbiased estimate of t maps back to mid + half * t.

    **Vectors** (``dim`` set) follow Wang et al. (ICDE 2019, Algorithm 4): each report picks
    ``k`` of the ``dim`` coordinates uniformly without replacement (independently of the data),
    reports each through the kernel at epsilon/k, and the server scales each reported coordinate
    by dim/k (the others count as 0 in units of t). Unbiased, since a coordinate is reported with
    probability k/dim; epsilon-LDP by basic composition of the k reports (the choice of
    coordinates carries no information). Per coordinate, with v(t) the kernel's variance at
    epsilon/k: Var = (dim/k)(v(t) + t^2) - t^2 (in units of t).

    ``coordinates`` (k) defaults to the k in [1, dim] that minimizes the worst-case per-coordinate
    variance above, computed from the kernel's exact formula (see ``best_coordinates``). Wang et
    al. give k = max(1, min(dim, floor(epsilon/2.5))) for their piecewise and hybrid mechanisms;
    the exact minimization agrees with that rule except near its breakpoints, and it also serves
    Duchi's mechanism, whose optimum sits at epsilon/k near 2.2 rather than 2.5.
    """

    lower: float
    upper: float
    dim: int | None
    coordinates: int | None

    @abc.abstractmethod
    def make_kernel(self, epsilon: float) -> UnitKernel:
        """The one-dimensional kernel of this mechanism at ``epsilon``."""

    def _validate_bounded(self) -> None:
        lower, upper = check_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.dim is not None:
            object.__setattr__(self, "dim", check_int(self.dim, "dim", minimum=1, maximum=MAX_DIM))
        if self.coordinates is not None:
            if self.dim is None:
                raise ValueError(
                    "coordinates (how many coordinates each report samples) needs dim; "
                    f"got coordinates={self.coordinates!r} without dim"
                )
            object.__setattr__(
                self,
                "coordinates",
                check_int(self.coordinates, "coordinates", minimum=1, maximum=self.dim),
            )

    # ---- geometry ----------------------------------------------------------------------------

    @property
    def value_shape(self) -> tuple[int, ...]:
        return () if self.dim is None else (self.dim,)

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2.0

    @property
    def midpoint(self) -> float:
        return self.lower + self.half_width

    @property
    def center(self) -> FloatArray:
        return np.full(self.width, self.midpoint)

    def to_unit(self, values: FloatArray) -> FloatArray:
        """Clip to [lower, upper] and map to [-1, 1]."""
        return np.clip((values - self.midpoint) / self.half_width, -1.0, 1.0)

    # ---- the kernel and the coordinate sampling ----------------------------------------------

    @cached_property
    def sampled_coordinates(self) -> int:
        """k: how many coordinates a report carries (1 for a scalar)."""
        if self.dim is None:
            return 1
        if self.coordinates is not None:
            return self.coordinates
        return self.best_coordinates()

    def best_coordinates(self) -> int:
        """The k in [1, dim] minimizing the worst-case per-coordinate variance (see the class
        docstring); ties go to the smaller k. Only k <= epsilon + 1 can win (beyond it every
        kernel's variance grows at least like k), so only those are evaluated."""
        assert self.dim is not None
        d = self.dim
        best_k, best_value = 1, math.inf
        for k in range(1, min(d, math.floor(self.epsilon) + 1) + 1):
            value = _sampled_worst_case(self.make_kernel(self.epsilon / k), d, k)
            if value < best_value * (1 - 1e-12):
                best_k, best_value = k, value
        return best_k

    @cached_property
    def kernel(self) -> UnitKernel:
        """The kernel each reported coordinate goes through (at epsilon/k for vectors)."""
        if self.dim is None:
            return self.make_kernel(self.epsilon)
        return self.make_kernel(self.epsilon / self.sampled_coordinates)

    @cached_property
    def report_dtype(self) -> np.dtype[Any]:
        """Vector reports: the sampled coordinates and the kernel's output for each."""
        k = self.sampled_coordinates
        return np.dtype([("coordinates", np.int64, (k,)), ("outputs", np.int64, (k,))])

    def implemented_epsilon(self) -> float:
        """The kernel's implemented epsilon, times k for vectors (basic composition)."""
        return self.sampled_coordinates * self.kernel.implemented_epsilon()

    # ---- device side -------------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        if self.dim is None:
            return self.kernel.sample(rng, self.to_unit(check_scalar_values(values)))
        d, k = self.dim, self.sampled_coordinates
        t = self.to_unit(check_vector_values(values, d))
        n = t.shape[0]
        coordinates = sample_subsets(rng, n, d, k)
        chosen = np.take_along_axis(t, coordinates, axis=1)
        reports = np.empty(n, dtype=self.report_dtype)
        reports["coordinates"] = coordinates
        reports["outputs"] = self.kernel.sample(rng, chosen.reshape(-1)).reshape(n, k)
        return reports

    # ---- wire --------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        widest = widest_int(0, self.kernel.output_size)
        if self.dim is None:
            return widest
        return [[widest_int(0, self.dim), widest]] * self.sampled_coordinates

    def to_wire(self, reports: Reports) -> list[Any]:
        """Scalars: the kernel's output (an integer). Vectors: the k pairs [coordinate, output],
        coordinates increasing."""
        if self.dim is None:
            return [int(v) for v in np.asarray(reports, dtype=np.int64)]
        pairs = np.stack([reports["coordinates"], reports["outputs"]], axis=-1)
        return pairs.tolist()

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        size = self.kernel.output_size
        if self.dim is None:
            return parse_int_payloads(payloads, size, "output")
        coordinates, outputs, errors = parse_coordinate_pairs(
            payloads, self.sampled_coordinates, self.dim, size
        )
        reports = np.empty(len(coordinates), dtype=self.report_dtype)
        if coordinates:
            reports["coordinates"] = np.asarray(coordinates, dtype=np.int64)
            reports["outputs"] = np.asarray(outputs, dtype=np.int64)
        return reports, errors

    # ---- server side -------------------------------------------------------------------------

    def estimates(self, reports: Reports) -> FloatArray:
        if self.dim is None:
            unit = self.kernel.decode(np.asarray(reports, dtype=np.int64))
            return self.midpoint + self.half_width * unit
        d, k = self.dim, self.sampled_coordinates
        n = len(reports)
        unit = np.zeros((n, d))
        decoded = self.kernel.decode(reports["outputs"].reshape(-1)).reshape(n, k)
        np.put_along_axis(unit, reports["coordinates"], decoded * (d / k), axis=1)
        return self.midpoint + self.half_width * unit

    def coverage(self, reports: Reports) -> IntArray:
        if self.dim is None:
            return super().coverage(reports)
        counts = np.bincount(reports["coordinates"].reshape(-1), minlength=self.dim)
        return counts.astype(np.int64)

    def variance(self, values: Any) -> FloatArray:
        scale = self.half_width**2
        if self.dim is None:
            return scale * self.kernel.variance(self.to_unit(check_scalar_values(values)))
        t = self.to_unit(check_vector_values(values, self.dim))
        kernel_variance = self.kernel.variance(t.reshape(-1)).reshape(t.shape)
        ratio = self.dim / self.sampled_coordinates
        return scale * (ratio * (kernel_variance + t * t) - t * t)

    def worst_case_variance(self) -> FloatArray:
        if self.dim is None:
            worst = float(np.max(self.kernel.variance(WORST_CASE_GRID)))
        else:
            worst = _sampled_worst_case(self.kernel, self.dim, self.sampled_coordinates)
        return np.full(self.width, self.half_width**2 * worst)


def _sampled_worst_case(kernel: UnitKernel, d: int, k: int) -> float:
    """max over t of (d/k)(v(t) + t^2) - t^2, in units of t."""
    t = WORST_CASE_GRID
    return float(np.max((d / k) * (kernel.variance(t) + t * t) - t * t))
