"""The Laplace mechanism for a bounded number, with exact discrete Laplace noise on a grid.

Local Laplace mechanism (docs/math/numeric.md): x in [lower, upper] is reported as x + Lap(b)
with b = (upper - lower)/epsilon, the width of the range being the sensitivity under
replacement. Variance 2b^2 (8/eps^2 on [-1, 1]).

Sampled exactly on a grid (docs/math/numeric.md; docs/architecture.md), so that no low-order
bits of a floating-point sampler can leak the input (Mironov, CCS 2012):

* the grid has N steps across [lower, upper] (2**20 by default, or ceil((upper-lower)/granularity)),
  step g = (upper - lower)/N; the clipped value is snapped to index a in {0, ..., N} by
  randomized rounding (unbiased);
* the report is the integer a + Z, with Z discrete Laplace, P[Z = z] proportional to
  exp(-|z| s/t), where s/t is the largest fraction with t <= 2**40 below eps/N
  (``sampling.floor_fraction``);
* two inputs differ by at most N grid steps, so the mechanism is exactly (N s/t)-LDP, and
  N s/t <= eps, short of it by a relative 1e-12 or less (``implemented_epsilon``).

The wire carries the integer a + Z (|a + Z| < 2**53); the server's estimate is lower + (a + Z) g,
unbiased, with variance g^2 (Var Z + phi(1 - phi)), phi the fractional part rounded away.

Impossible reports are refused: ``parse_wire`` accepts only indices in [-M, N + M], M the
smallest noise magnitude with P[|Z| > M] <= 2**-64 (``DiscreteLaplace.magnitude_bound``; about
45 t/s, i.e. 45/eps range widths). An honest device's report is refused with probability at
most 2**-64 whatever its value (a false-rejection rate of 2**-64 per report), and one accepted
report moves the mean of n by at most (N + 2M) g/n = (upper - lower)(1 + 2M/N)/n
(``estimate_range``), where an index of 2**53 - 1 used to move a mean on [0, 1] to 8.6e6.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from client_sdk.mechanisms._validation import check_epsilon
from client_sdk.mechanisms._wire import (
    IMPLAUSIBLE_PROBABILITY,
    SIGNED_WIRE_LIMIT,
    parse_int_payloads,
    widest_int,
)
from client_sdk.mechanisms.base import FloatArray, Reports, WireFormatError
from client_sdk.mechanisms.grid import (
    DEFAULT_GRID_BITS,
    grid_steps,
    randomized_round,
    rounding_split,
)
from client_sdk.mechanisms.numeric import (
    NumericMechanism,
)
from client_sdk.mechanisms.numeric_checks import (
    check_bounds,
    check_positive,
    check_scalar_values,
)
from client_sdk.randomness import RandomSource
from client_sdk.sampling import MAX_LAPLACE_DENOMINATOR, DiscreteLaplace, floor_fraction

MAX_NOISE_SCALE = 1 << 36
"""Largest noise scale in grid steps: outputs then stay below 2**53 with probability
1 - e^-128, and the rate eps/N keeps a fine rational approximation."""


@dataclasses.dataclass(frozen=True)
class Laplace(NumericMechanism):
    """The Laplace mechanism on [lower, upper] (scalars). Config:
    ``{"mechanism": "laplace", "epsilon", "lower", "upper"}``, optionally ``"granularity"``."""

    name: ClassVar[str] = "laplace"
    epsilon: float
    lower: float
    upper: float
    granularity: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        lower, upper = check_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.granularity is not None:
            object.__setattr__(self, "granularity", check_positive(self.granularity, "granularity"))
        if self.grid_steps / self.epsilon > MAX_NOISE_SCALE:
            raise ValueError(
                f"epsilon={self.epsilon!r} is too small for a grid of {self.grid_steps} steps "
                "(the noise scale would exceed 2**36 steps); use a coarser granularity"
            )

    # ---- the grid and the noise ------------------------------------------------------------

    @cached_property
    def grid_steps(self) -> int:
        """N: grid steps across [lower, upper]."""
        return grid_steps(self.upper - self.lower, self.granularity, 1 << DEFAULT_GRID_BITS)

    @property
    def grid_step(self) -> float:
        """g = (upper - lower)/N, in the value's units."""
        return (self.upper - self.lower) / self.grid_steps

    @cached_property
    def noise(self) -> DiscreteLaplace:
        """Discrete Laplace noise of scale t/s (grid steps), s/t <= eps/N."""
        rate = floor_fraction(Fraction(self.epsilon) / self.grid_steps, MAX_LAPLACE_DENOMINATOR)
        return DiscreteLaplace(1 / rate)

    @property
    def scale(self) -> float:
        """The noise scale in the value's units: g t/s, about (upper - lower)/eps."""
        return self.grid_step * float(self.noise.scale)

    def implemented_epsilon(self) -> float:
        """N s/t: the exact epsilon of the discretized mechanism (at most ``epsilon``)."""
        return float(self.grid_steps / self.noise.scale)

    def implemented_rate(self) -> Fraction:
        """N s/t as an exact fraction, for checks against Fraction(epsilon)."""
        return self.grid_steps / self.noise.scale

    # ---- shape -------------------------------------------------------------------------------

    @property
    def value_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def center(self) -> FloatArray:
        return np.array([(self.lower + self.upper) / 2.0])

    def _grid_position(self, values: FloatArray) -> FloatArray:
        clipped = np.clip(values, self.lower, self.upper)
        return (clipped - self.lower) / self.grid_step

    # ---- device side -------------------------------------------------------------------------

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        position = self._grid_position(check_scalar_values(values))
        snapped = randomized_round(rng, position, top=self.grid_steps)
        return snapped + self.noise.sample(rng, snapped.size)

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        low, high = self.plausible_range
        return widest_int(low, high + 1)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    @cached_property
    def plausible_range(self) -> tuple[int, int]:
        """The accepted indices [-M, N + M]: outside them an honest report falls with
        probability at most ``IMPLAUSIBLE_PROBABILITY`` (module docstring)."""
        margin = self.noise.magnitude_bound(IMPLAUSIBLE_PROBABILITY)
        return max(1 - SIGNED_WIRE_LIMIT, -margin), min(
            SIGNED_WIRE_LIMIT - 1, self.grid_steps + margin
        )

    def estimate_range(self) -> tuple[float, float]:
        """The smallest and largest estimate one accepted report can have: one report moves
        the mean of n by at most (high - low)/n."""
        low, high = self.plausible_range
        return float(self.estimates(np.array([low]))[0]), float(self.estimates(np.array([high]))[0])

    def parse_wire(self, payloads: Any) -> tuple[Reports, list[WireFormatError]]:
        low, high = self.plausible_range
        return parse_int_payloads(payloads, high + 1, "grid index", low=low)

    # ---- server side -------------------------------------------------------------------------

    def estimates(self, reports: Reports) -> FloatArray:
        return self.lower + np.asarray(reports, dtype=np.float64) * self.grid_step

    def variance(self, values: Any) -> FloatArray:
        _, phi = rounding_split(self._grid_position(check_scalar_values(values)), self.grid_steps)
        return self.grid_step**2 * (self.noise.variance() + phi * (1 - phi))

    def worst_case_variance(self) -> FloatArray:
        return np.array([self.grid_step**2 * (self.noise.variance() + 0.25)])
