"""The grid that numeric noise lives on, and how an input reaches it.

Where noise lives on a grid (Laplace, Gaussian, piecewise), the input is first snapped to the grid
by *randomized* rounding (up with probability equal to the fractional part), which keeps every
mechanism exactly unbiased; the rounding adds g^2 phi(1 - phi) to the variance (g the grid step,
phi the fractional part), which the exact variance formulas include. Privacy does not depend on
how the input reaches the grid: the claim holds for every grid input, so for every mixture
(docs/math/numeric.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms.base import FloatArray
from client_sdk.randomness import RandomSource, raw_words

IntArray = npt.NDArray[np.int64]

DEFAULT_GRID_BITS = 20
"""Scalar grids default to 2**20 steps across [lower, upper]."""
MAX_GRID_STEPS = 1 << 40
_TWO_64 = float(1 << 64)


def exp_below(x: float) -> float:
    """A double at most e^x and within 2 ulps of it (``math.exp`` is accurate to < 1 ulp).

    Mechanisms build their probabilities from this bound, so that a ratio shown to be at most
    ``exp_below(eps)`` in exact rational arithmetic is at most the real e^eps.
    """
    return math.nextafter(math.exp(x), 0.0)


def grid_steps(width: float, granularity: float | None, default_steps: int) -> int:
    """How many grid steps cover an interval of ``width``.

    ``granularity=None`` gives ``default_steps``; otherwise N = ceil(width / granularity), a ratio
    within 1e-9 of an integer counting as that integer, so that a granularity that divides the
    width (up to rounding) gives exactly width/granularity steps. The step actually used is
    width/N, at most the requested granularity.
    """
    if granularity is None:
        return default_steps
    ratio = width / granularity
    nearest = round(ratio)
    steps = nearest if abs(ratio - nearest) <= 1e-9 * max(1.0, ratio) else math.ceil(ratio)
    if not 1 <= steps <= MAX_GRID_STEPS:
        raise ValueError(
            f"granularity must give between 1 and 2**40 grid steps over the range; "
            f"got granularity={granularity!r} for a width of {width!r} ({ratio:.3g} steps)"
        )
    return int(steps)


def rounding_split(u: FloatArray, top: int | None = None) -> tuple[IntArray, FloatArray]:
    """Grid point below ``u`` and the fractional part phi in [0, 1].

    With ``top`` (the last grid index), u is clipped to [0, top] and u = top gives (top-1, 1)
    so that the upper neighbour stays on the grid.
    """
    if top is not None:
        u = np.clip(u, 0.0, float(top))
    base = np.floor(u)
    if top is not None and top >= 1:
        base = np.minimum(base, top - 1)
    return base.astype(np.int64), u - base


def _round_up_thresholds(phi: FloatArray) -> npt.NDArray[np.uint64]:
    """64-bit thresholds floor(phi 2**64) for phi in [0, 1) (phi = 1 is handled separately)."""
    scaled = np.minimum(np.floor(phi * _TWO_64), math.nextafter(_TWO_64, 0.0))
    return scaled.astype(np.uint64)


def randomized_round(rng: RandomSource | None, u: FloatArray, top: int | None = None) -> IntArray:
    """Round each u to floor(u) + 1 with probability phi = u - floor(u), else floor(u).

    The probability implemented is floor(phi 2**64)/2**64 for phi < 1 and 1 for phi = 1 (see
    ``rounding_probability``), so E[result] = u up to 2**-64 grid steps, and exactly at grid
    points. This is preprocessing of the input, not noise: the privacy claim holds for every
    grid point, hence for any distribution over them.
    """
    base, phi = rounding_split(np.asarray(u, dtype=np.float64), top)
    flat_phi = phi.reshape(-1)
    up = (raw_words(rng, flat_phi.size) < _round_up_thresholds(flat_phi)) | (flat_phi >= 1.0)
    return base + up.reshape(base.shape)


def rounding_probability(u: FloatArray, top: int | None = None) -> list[Fraction]:
    """The exact probabilities with which ``randomized_round`` rounds each u up."""
    _, phi = rounding_split(np.asarray(u, dtype=np.float64), top)
    thresholds = _round_up_thresholds(phi.reshape(-1))
    return [
        Fraction(1) if p >= 1.0 else Fraction(int(v), 1 << 64)
        for p, v in zip(phi.reshape(-1), thresholds, strict=True)
    ]
