"""The piecewise and hybrid mechanisms of Wang et al. (ICDE 2019), sampled exactly on a grid.

Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu, "Collecting and analyzing multidimensional data
with local differential privacy", ICDE 2019 (docs/math/numeric.md).

**Piecewise mechanism (PM).** In the paper, t in [-1, 1] is reported as a value on [-C, C],
C = (e^(eps/2) + 1)/(e^(eps/2) - 1), with density p on a window [l(t), r(t)] of width C - 1 that
slides with t, and p/e^eps elsewhere. Here the same construction lives on integers, so it is
sampled with exact uniform integers and its channel can be enumerated:

* the input t is snapped by randomized rounding to a in {0, ..., N} (N grid steps over [-1, 1],
  ``granularity`` setting N; 2**20 by default);
* the outputs are j in {0, ..., N + W - 1}; the window of input a is {a, ..., a + W - 1} with
  W = round(N e^(-eps/2)) (the paper's ratio of window width to travel, (C-1)/(C+1));
* with probability P_in the output is uniform on the window, otherwise uniform on the N other
  outputs. P_in = W e^eps / (W e^eps + N), rounded *down* to a 64-bit threshold, makes the two
  probability levels P_in/W and (1 - P_in)/N differ by a factor of at most e^eps (exactly
  e^eps up to 2**-64): the implemented channel is epsilon-LDP, and that is checked from the
  integer threshold.

E[j | a] = slope * a + kappa with slope = W (p_hi - p_lo), so (j - kappa)/slope is unbiased for a;
its exact variance is computed from closed-form sums. As N grows this is the paper's PM, with
variance t^2/(e^(eps/2) - 1) + (e^(eps/2) + 3)/(3 (e^(eps/2) - 1)^2).

**Hybrid mechanism (HM).** With probability alpha = 1 - e^(-eps/2) report through PM, otherwise
through Duchi's mechanism (when eps > eps* ~ 0.61; below it, always Duchi). Both branches are
unbiased and epsilon-LDP and the branch is chosen independently of the data, so HM is too; its
variance is alpha Var_PM + (1 - alpha) Var_Duchi, in which the t^2 terms cancel.
The wire carries one integer: j for a PM output, N + W + bit for a Duchi output.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from client_sdk.mechanisms._validation import check_epsilon
from client_sdk.mechanisms.base import FloatArray
from client_sdk.mechanisms.duchi import DuchiKernel
from client_sdk.mechanisms.grid import (
    DEFAULT_GRID_BITS,
    exp_below,
    grid_steps,
    randomized_round,
    rounding_probability,
    rounding_split,
)
from client_sdk.mechanisms.numeric import (
    BoundedMechanism,
    IntArray,
    UnitKernel,
)
from client_sdk.mechanisms.numeric_checks import (
    check_positive,
)
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    probability_threshold,
    raw_words,
    uniform_below,
)

EPSILON_STAR = math.log(
    (
        -5
        + 2 * (6353 - 405 * math.sqrt(241)) ** (1 / 3)
        + 2 * (6353 + 405 * math.sqrt(241)) ** (1 / 3)
    )
    / 27
)
"""eps* ~ 0.6094 (Wang et al. 2019, Lemma 5): at or below it the hybrid mechanism is Duchi's."""


def _sum_to(n: Any) -> Any:
    """sum_{j=0}^{n} j for integers n >= 0 (as floats)."""
    return n * (n + 1) / 2


def _squares_to(n: Any) -> Any:
    """sum_{j=0}^{n} j^2 for integers n >= 0 (as floats)."""
    return n * (n + 1) * (2 * n + 1) / 6


@dataclasses.dataclass(frozen=True)
class PiecewiseKernel:
    """The piecewise mechanism on the integer grid (see the module docstring)."""

    epsilon: float
    steps: int

    @cached_property
    def window(self) -> int:
        """W = round(N e^(-eps/2)), at least 1."""
        return max(1, round(self.steps * math.exp(-self.epsilon / 2)))

    @property
    def output_size(self) -> int:
        return self.steps + self.window

    @cached_property
    def inside_threshold(self) -> int:
        """The threshold of P_in = W e^eps / (W e^eps + N), rounded down."""
        e = Fraction(exp_below(self.epsilon))
        w = self.window
        return probability_threshold(w * e / (w * e + self.steps), rounding="down")

    @cached_property
    def levels(self) -> tuple[Fraction, Fraction]:
        """(p_hi, p_lo): the implemented probability of each window and each other output."""
        p_in = Fraction(self.inside_threshold, WORD_SPAN)
        return p_in / self.window, (1 - p_in) / self.steps

    @cached_property
    def _affine(self) -> tuple[float, float]:
        """(slope, kappa) with E[j | a] = slope * a + kappa."""
        p_high, p_low = self.levels
        w, size = self.window, self.output_size
        slope = w * (p_high - p_low)
        kappa = (p_high - p_low) * w * (w - 1) / 2 + p_low * size * (size - 1) / 2
        return float(slope), float(kappa)

    def sample(self, rng: RandomSource | None, t: FloatArray) -> IntArray:
        n = int(np.size(t))
        a = randomized_round(
            rng, (np.asarray(t, dtype=np.float64) + 1.0) / 2.0 * self.steps, top=self.steps
        )
        inside = raw_words(rng, n) < np.uint64(self.inside_threshold)
        in_window = a + uniform_below(rng, self.window, n)
        other = uniform_below(rng, self.steps, n)  # one of the N outputs outside the window
        outside = np.where(other < a, other, other + self.window)
        return np.where(inside, in_window, outside)

    def decode(self, outputs: IntArray) -> FloatArray:
        slope, kappa = self._affine
        grid_estimate = (np.asarray(outputs, dtype=np.float64) - kappa) / slope
        return 2.0 * grid_estimate / self.steps - 1.0

    def grid_variance(self, a: IntArray) -> FloatArray:
        """Var[(j - kappa)/slope | a] for grid inputs a, from closed-form sums of j - a."""
        p_high, p_low = self.levels
        diff, low = float(p_high - p_low), float(p_low)
        a = np.asarray(a, dtype=np.float64)
        w, top = float(self.window), float(self.output_size - 1) - a
        first = diff * (w - 1) * w / 2 + low * (_sum_to(top) - _sum_to(a))
        second = diff * _squares_to(w - 1) + low * (_squares_to(top) + _squares_to(a))
        slope, _ = self._affine
        return np.asarray((second - first * first) / slope**2)

    def variance(self, t: FloatArray) -> FloatArray:
        u = (np.asarray(t, dtype=np.float64) + 1.0) / 2.0 * self.steps
        base, phi = rounding_split(u, top=self.steps)
        grid = (1 - phi) * self.grid_variance(base) + phi * self.grid_variance(base + 1)
        return (2.0 / self.steps) ** 2 * (grid + phi * (1 - phi))

    def implemented_epsilon(self) -> float:
        """ln(p_hi / p_lo), exactly from the integer threshold."""
        p_high, p_low = self.levels
        ratio = p_high / p_low
        return math.log(ratio.numerator) - math.log(ratio.denominator)

    def output_distribution(self, t: float) -> FloatArray:
        if self.output_size > 1 << 22:
            raise ValueError(f"{self.output_size} outputs are too many to enumerate")
        p_high, p_low = (float(p) for p in self.levels)
        u = np.array([(t + 1.0) / 2.0 * self.steps])
        base = int(rounding_split(u, self.steps)[0][0])
        phi = float(rounding_probability(u, self.steps)[0])  # as randomized_round implements it
        probabilities = np.full(self.output_size, p_low)
        probabilities[base : base + self.window] += (1 - phi) * (p_high - p_low)
        probabilities[base + 1 : base + 1 + self.window] += phi * (p_high - p_low)
        return probabilities


@dataclasses.dataclass(frozen=True)
class HybridKernel:
    """PM with probability alpha = 1 - e^(-eps/2) (when eps > eps*), otherwise Duchi."""

    epsilon: float
    steps: int

    @cached_property
    def piecewise(self) -> PiecewiseKernel:
        return PiecewiseKernel(self.epsilon, self.steps)

    @cached_property
    def duchi(self) -> DuchiKernel:
        return DuchiKernel(self.epsilon)

    @cached_property
    def alpha_threshold(self) -> int:
        if self.epsilon <= EPSILON_STAR:
            return 0
        return probability_threshold(-math.expm1(-self.epsilon / 2), rounding="nearest")

    @property
    def alpha(self) -> float:
        """The implemented probability of the PM branch."""
        return float(Fraction(self.alpha_threshold, WORD_SPAN))

    @property
    def output_size(self) -> int:
        return self.piecewise.output_size + 2

    def sample(self, rng: RandomSource | None, t: FloatArray) -> IntArray:
        t = np.asarray(t, dtype=np.float64)
        use_piecewise = raw_words(rng, t.size) < np.uint64(self.alpha_threshold)
        out = np.empty(t.size, dtype=np.int64)
        out[use_piecewise] = self.piecewise.sample(rng, t[use_piecewise])
        out[~use_piecewise] = self.piecewise.output_size + self.duchi.sample(rng, t[~use_piecewise])
        return out

    def decode(self, outputs: IntArray) -> FloatArray:
        outputs = np.asarray(outputs, dtype=np.int64)
        size = self.piecewise.output_size
        from_piecewise = outputs < size
        out = np.empty(outputs.size, dtype=np.float64)
        out[from_piecewise] = self.piecewise.decode(outputs[from_piecewise])
        out[~from_piecewise] = self.duchi.decode(outputs[~from_piecewise] - size)
        return out

    def variance(self, t: FloatArray) -> FloatArray:
        alpha = self.alpha
        duchi = self.duchi.variance(t)
        if alpha == 0:
            return duchi
        return alpha * self.piecewise.variance(t) + (1 - alpha) * duchi

    def implemented_epsilon(self) -> float:
        """The larger of the branches' (the branch is drawn independently of the input)."""
        duchi = self.duchi.implemented_epsilon()
        if self.alpha_threshold == 0:
            return duchi
        return max(duchi, self.piecewise.implemented_epsilon())

    def output_distribution(self, t: float) -> FloatArray:
        alpha = self.alpha
        return np.concatenate(
            [
                alpha * self.piecewise.output_distribution(t),
                (1 - alpha) * self.duchi.output_distribution(t),
            ]
        )


class _GridBounded(BoundedMechanism):
    """Bounded mechanisms whose kernel has an input grid (``granularity``)."""

    granularity: float | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        self._validate_bounded()
        self._validate_grid()

    def _validate_grid(self) -> None:
        if self.granularity is not None:
            object.__setattr__(self, "granularity", check_positive(self.granularity, "granularity"))
        _ = self.grid_steps  # validates the number of steps

    @cached_property
    def grid_steps(self) -> int:
        """N: grid steps over [lower, upper] (2**20 by default; see ``grid.grid_steps``)."""
        return grid_steps(self.upper - self.lower, self.granularity, 1 << DEFAULT_GRID_BITS)


@dataclasses.dataclass(frozen=True)
class Piecewise(_GridBounded):
    """The piecewise mechanism on [lower, upper] (``dim``: on [lower, upper]^dim with coordinate
    sampling). Config: ``{"mechanism": "piecewise", "epsilon", "lower", "upper"}`` plus
    optionally ``"dim"``, ``"coordinates"``, ``"granularity"``."""

    name: ClassVar[str] = "piecewise"
    epsilon: float
    lower: float
    upper: float
    dim: int | None = None
    coordinates: int | None = None
    granularity: float | None = None

    def make_kernel(self, epsilon: float) -> UnitKernel:
        return PiecewiseKernel(epsilon, self.grid_steps)


@dataclasses.dataclass(frozen=True)
class Hybrid(_GridBounded):
    """The hybrid mechanism on [lower, upper] (``dim``: on [lower, upper]^dim with coordinate
    sampling). Config: ``{"mechanism": "hybrid", "epsilon", "lower", "upper"}`` plus optionally
    ``"dim"``, ``"coordinates"``, ``"granularity"``."""

    name: ClassVar[str] = "hybrid"
    epsilon: float
    lower: float
    upper: float
    dim: int | None = None
    coordinates: int | None = None
    granularity: float | None = None

    def make_kernel(self, epsilon: float) -> UnitKernel:
        return HybridKernel(epsilon, self.grid_steps)
