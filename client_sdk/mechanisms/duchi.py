"""Duchi et al.'s mechanism for bounded numbers: a two-point output.

Duchi, Jordan & Wainwright (FOCS 2013; JASA 2018), in the one-dimensional form presented by
Wang et al. (ICDE 2019, section III-A; docs/math/numeric.md): for t in [-1, 1], output +B with
probability 1/2 + t(e^eps - 1)/(2(e^eps + 1)) and -B otherwise, B = (e^eps + 1)/(e^eps - 1).
Unbiased with variance B^2 - t^2.

As implemented, in two exact steps: t is first rounded at random to s = +1 with probability
(1 + t)/2, else to s = -1 (``numeric.randomized_round``: input preprocessing, unbiased); then the
output is +B with probability T_s/2**64, a 64-bit threshold compared with a uniform word. With
e a double just below e^eps (``exp_below``), T_-1 = ceil(2**64/(e + 1)) and T_+1 = 2**64 - T_-1,
so the channel from s to the output has the ratio T_+1/T_-1 = 2**64/T_-1 - 1 <= e <= e^eps in
both rows, exactly, and every input t mixes those two rows. B is taken from the implemented
probability, B = 1/(2 T_+1/2**64 - 1), so that the output is exactly unbiased and Var = B^2 - t^2
holds exactly (P[+B | t] = 1/2 + t (T_+1/2**64 - 1/2), linear in t).

The wire carries the output bit (0 for -B, 1 for +B).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import numpy as np

from client_sdk.mechanisms._validation import check_epsilon
from client_sdk.mechanisms.base import FloatArray
from client_sdk.mechanisms.grid import (
    exp_below,
    randomized_round,
    rounding_probability,
)
from client_sdk.mechanisms.numeric import (
    BoundedMechanism,
    IntArray,
    UnitKernel,
)
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    probability_threshold,
    raw_words,
)


@dataclasses.dataclass(frozen=True)
class DuchiKernel:
    """Duchi's two-point randomizer of t in [-1, 1] at ``epsilon`` (outputs 0 and 1)."""

    epsilon: float

    output_size: ClassVar[int] = 2

    @cached_property
    def low_threshold(self) -> int:
        """T_lo: the 64-bit threshold of P[+B | t = -1], rounded up (so T_hi/T_lo <= e^eps)."""
        e = Fraction(exp_below(self.epsilon))
        return max(1, probability_threshold(1 / (e + 1), rounding="up"))

    @property
    def high_threshold(self) -> int:
        """T_hi = 2**64 - T_lo: the threshold of P[+B | t = 1]."""
        return WORD_SPAN - self.low_threshold

    @cached_property
    def bound(self) -> float:
        """B = 1/(2 P_hi - 1) for the implemented P_hi = T_hi/2**64 (about coth(eps/2))."""
        p_high = Fraction(self.high_threshold, WORD_SPAN)
        return float(1 / (2 * p_high - 1))

    def sample(self, rng: RandomSource | None, t: FloatArray) -> IntArray:
        side = randomized_round(rng, (np.asarray(t, dtype=np.float64) + 1.0) / 2.0, top=1)
        thresholds = np.where(
            side == 1, np.uint64(self.high_threshold), np.uint64(self.low_threshold)
        )
        words = raw_words(rng, side.size)
        return (words < thresholds).astype(np.int64)

    def decode(self, outputs: IntArray) -> FloatArray:
        return self.bound * (2.0 * np.asarray(outputs, dtype=np.float64) - 1.0)

    def variance(self, t: FloatArray) -> FloatArray:
        t = np.asarray(t, dtype=np.float64)
        return self.bound**2 - t * t

    def implemented_epsilon(self) -> float:
        """ln(T_hi / T_lo): the ratio of P[+B] at t = 1 and t = -1 (and of P[-B], reversed)."""
        return math.log(self.high_threshold) - math.log(self.low_threshold)

    def output_distribution(self, t: float) -> FloatArray:
        """[P(-B), P(+B)] at t, from the thresholds and the rounding probability, exactly."""
        up = rounding_probability(np.array([(t + 1.0) / 2.0]), top=1)[0]
        p_one = float(up * Fraction(self.high_threshold, WORD_SPAN))
        p_one += float((1 - up) * Fraction(self.low_threshold, WORD_SPAN))
        return np.array([1.0 - p_one, p_one])


@dataclasses.dataclass(frozen=True)
class Duchi(BoundedMechanism):
    """Duchi et al.'s mechanism on [lower, upper] (``dim`` set: on [lower, upper]^dim, with
    coordinate sampling). Config: ``{"mechanism": "duchi", "epsilon", "lower", "upper"}`` plus
    optionally ``"dim"`` and ``"coordinates"``."""

    name: ClassVar[str] = "duchi"
    epsilon: float
    lower: float
    upper: float
    dim: int | None = None
    coordinates: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        self._validate_bounded()

    def make_kernel(self, epsilon: float) -> UnitKernel:
        return DuchiKernel(epsilon)
