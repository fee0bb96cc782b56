"""1BitMean with alpha-point rounding and memoization: Microsoft's counter mechanism.

Ding, Kulkarni, Yekhanin, "Collecting Telemetry Data Privately", NeurIPS 2017
(docs/math/memoization.md).

One bit. For x in [lower, upper] (the paper's [0, m], m = upper - lower) the device sends b = 1
with probability 1/(e^eps+1) + ((x - lower)/m) (e^eps-1)/(e^eps+1). This is exactly Duchi et
al.'s two-point mechanism on t = 2(x - lower)/m - 1, so the extreme probabilities and the
decoding are those of ``duchi.DuchiKernel``: P[1] = T_lo/2**64 at x = lower and T_hi/2**64 at x =
upper (64-bit thresholds, T_hi/T_lo <= e^eps exactly), and the estimate of a report is
lower + m (b(e^eps+1) - 1)/(e^eps-1), written mid + (m/2) B (2b - 1) with B = (e^eps+1)/(e^eps-1)
taken from the implemented T_hi; its variance is (m/2)^2 B^2 - (x - mid)^2 <= (m^2/4)
((e^eps+1)/(e^eps-1))^2 (docs/math/memoization.md). Unmemoized, a report is the kernel's own sample.

alpha-point rounding (the paper's section on memoization; details checked here). The range is
cut into ``buckets`` = s equal intervals with endpoints a_0 = lower, ..., a_s = upper. Each device
draws alpha uniform in [0, 1) ONCE (memoized per device and campaign) and rounds x in
[a_l, a_l+1] up to a_l+1 when its fractional position in the interval exceeds alpha, down
otherwise; over the draw of alpha the rounding is unbiased, E[a] = x. The bit is then memoized
per rounded point: one permanent bit per a_j, HMAC-derived from the device secret, equal to 1
with probability T_j/2**64, T_j = T_lo + floor(j (T_hi - T_lo)/s) (linear in j to 2**-64).
A device whose value stays put therefore sends the same bit forever (no averaging attack), and
over its lifetime it can reveal at most s + 1 memoized bits: the ledger charges eps once per
rounded point (``memo_keys``), so the lifetime spend is at most (s + 1) eps, whatever the values.

Accuracy does not depend on s (derived here, checked by Monte Carlo in the tests). In one round
every device has its own alpha, so with E[x_hat | a] = a,
    Var = E[(m/2)^2 B^2 - (a - mid)^2] + Var(a) = (m/2)^2 B^2 - (x - mid)^2,
the variance of 1BitMean without rounding. The default ``buckets = 1`` (round to lower or upper)
is therefore the most private choice at no cost in a single round; larger s are offered to match
deployments (finer rounding changes the rounded point, hence the memoized bit, less often when
the value drifts, at the price of more distinct points).

Output perturbation (``gamma``, default 0). The paper also flips the memoized bit with a small
probability gamma at every report, to blur the moment a value crosses a rounding boundary. Then
P[b = 1] = gamma + (1 - 2 gamma) pi, the decoding divides by 1 - 2 gamma, the variance is
(m/2)^2 B^2/(1 - 2 gamma)^2 - (x - mid)^2, one report is at most eps-LDP (``privacy_epsilon`` gives
its exact, smaller value) and unlimited reports of one rounded point still reveal at most eps
(``epsilon_inf``), the memoized bit's guarantee.

``memoize = false`` gives plain (one-shot) 1BitMean: no rounding, a fresh bit per report, and no
device secret.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import (
    parse_int_payloads,
)
from client_sdk.mechanisms.base import FloatArray, Reports, WireFormatError
from client_sdk.mechanisms.duchi import DuchiKernel
from client_sdk.mechanisms.memoization import KeyedSource, check_keyed_source
from client_sdk.mechanisms.numeric import (
    NumericMechanism,
)
from client_sdk.mechanisms.numeric_checks import (
    check_bounds,
    check_scalar_values,
)
from client_sdk.mechanisms.self_memoizing import SwitchableMemoization
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli,
    probability_threshold,
    raw_words,
    threshold_probability,
)

__all__ = ["OneBitMean"]

MAX_BUCKETS = 1 << 16
ALPHA_LABEL = "onebitmean/alpha"
BIT_LABEL = "onebitmean/bit"


@dataclasses.dataclass(frozen=True)
class OneBitMean(SwitchableMemoization, NumericMechanism):
    """1BitMean on [lower, upper] (module docstring).

    Config: ``{"mechanism": "onebitmean", "epsilon", "lower", "upper"}`` and optionally
    ``"buckets"`` (s, default 1), ``"gamma"`` (default 0) and ``"memoize"`` (default true:
    ``perturb`` then needs ``permanent=``, a keyed source). Reports are int64 bits; the wire is
    0 or 1.
    """

    name: ClassVar[str] = "onebitmean"
    epsilon: float
    lower: float
    upper: float
    buckets: int = 1
    gamma: float = 0.0
    memoize: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        lower, upper = check_bounds(self.lower, self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        object.__setattr__(
            self, "buckets", check_int(self.buckets, "buckets", minimum=1, maximum=MAX_BUCKETS)
        )
        gamma = self.gamma
        if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < 0.5:
            raise ValueError(f"gamma must be a number in [0, 0.5); got {gamma!r}")
        object.__setattr__(self, "gamma", float(gamma))
        self._check_memoize()

    # ---- geometry and probabilities ----------------------------------------------------------

    @property
    def value_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def midpoint(self) -> float:
        return (self.lower + self.upper) / 2.0

    @property
    def half_width(self) -> float:
        return (self.upper - self.lower) / 2.0

    @property
    def center(self) -> FloatArray:
        return np.array([self.midpoint])

    @cached_property
    def kernel(self) -> DuchiKernel:
        """The bit's implemented probabilities (Duchi's kernel, the same mechanism)."""
        return DuchiKernel(self.epsilon)

    @cached_property
    def _point_thresholds(self) -> npt.NDArray[np.uint64]:
        """T_j = T_lo + floor(j (T_hi - T_lo) / s): the bit's threshold at the rounded point a_j.

        Linear in j up to one unit of 2**-64 (so the decoding is unbiased to that precision),
        T_0 = T_lo and T_s = T_hi exactly: every point's P[1] lies between the extremes."""
        low, high, s = self.kernel.low_threshold, self.kernel.high_threshold, self.buckets
        table = [low + (j * (high - low)) // s for j in range(s + 1)]
        return np.array(table, dtype=np.uint64)

    @cached_property
    def _point_probabilities(self) -> list[float]:
        return [float(threshold_probability(int(t))) for t in self._point_thresholds]

    @cached_property
    def _flip_threshold(self) -> int:
        return probability_threshold(Fraction(self.gamma), rounding="nearest")

    @property
    def flip_probability(self) -> float:
        """gamma as implemented (a multiple of 2**-64)."""
        return float(threshold_probability(self._flip_threshold))

    # ---- linkability (docs/math/memoization.md, "What an observer can link") ----------------

    deterministic_pseudonym: ClassVar[bool] = False
    """One bit cannot name a device: the memoized bit is shared by a fraction of the devices."""

    @property
    def linkability(self) -> str:
        """What an observer can link across a device's reports."""
        if not self.memoize:
            return "nothing: a fresh bit in every report"
        return (
            "no pseudonym (one bit); the memoized bit of the rounded point recurs with "
            f"probability 1 - gamma = {1 - self.flip_probability:.4g}, so identical bits are "
            "likely while the rounded point stays put; alpha is per (device, campaign)"
        )

    @cached_property
    def _one_probabilities(self) -> tuple[Fraction, Fraction]:
        """P[b = 1] at x = lower and at x = upper, flip included, exactly."""
        flip = threshold_probability(self._flip_threshold)
        low = threshold_probability(self.kernel.low_threshold)
        high = threshold_probability(self.kernel.high_threshold)
        return flip + (1 - 2 * flip) * low, flip + (1 - 2 * flip) * high

    def implemented_epsilon(self) -> float:
        """One report: the larger log ratio of P[1] (upper vs lower) and P[0] (lower vs upper).

        Every x (and every rounded point) gives P[1] between the two extremes, so these bound
        every pair of inputs."""
        low, high = self._one_probabilities
        return max(_log(high / low), _log((1 - low) / (1 - high)))

    @property
    def privacy_epsilon(self) -> float:
        """One report's guarantee: epsilon, or the exact smaller value when gamma > 0."""
        return self.epsilon if self._flip_threshold == 0 else self.implemented_epsilon()

    @property
    def epsilon_inf(self) -> float:
        """Unlimited reports of one rounded point reveal at most its memoized bit: epsilon."""
        return self.epsilon

    @property
    def lifetime_epsilon(self) -> float:
        """A device's total over any sequence of values, memoized: s + 1 rounded points."""
        return (self.buckets + 1) * self.epsilon

    def output_distribution(self, value: float) -> FloatArray:
        """[P[b = 0], P[b = 1]] of one report for a value, rounding and flip included."""
        t = self._unit(np.array([value], dtype=np.float64))
        flip = float(threshold_probability(self._flip_threshold))
        if self.memoize:
            position = (t + 1.0) / 2.0 * self.buckets
            low = np.minimum(np.floor(position), self.buckets - 1)
            up = float(position[0] - low[0])
            below, above = self._point_probabilities[int(low[0]) : int(low[0]) + 2]
            pi = (1 - up) * below + up * above
        else:
            pi = float(self.kernel.output_distribution(float(t[0]))[1])
        one = flip + (1 - 2 * flip) * pi
        return np.array([1.0 - one, one])

    # ---- device side ---------------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One bit per value. Memoized (default): needs the keyed source of the device and
        campaign (``permanent``); the bit is the memoized bit of the value's rounded point (alpha
        memoized too), then flipped with probability gamma using ``rng``."""
        x = check_scalar_values(values)
        keys = self.keyed_source(permanent)
        if keys is None:
            bits = self.kernel.sample(rng, self._unit(x))
            return self._flip(bits, rng)
        points = self.rounded_points(x, permanent=keys)
        bits = np.empty(x.size, dtype=np.int64)
        for point in np.unique(points).tolist():
            rows = points == point
            word = raw_words(keys.source(BIT_LABEL, point), 1)
            threshold = self._point_thresholds[point]
            bits[rows] = int(word[0] < threshold)
        return self._flip(bits, rng)

    def perturb_independent_devices(
        self, values: Any, *, rng: RandomSource | None = None
    ) -> Reports:
        """Each value as the first report of its own new device: alpha, the rounded point's
        bit and the flip all fresh from ``rng`` (rounding included when memoized)."""
        x = check_scalar_values(values)
        if not self.memoize:
            return self.perturb(x, rng=rng)
        alphas = raw_words(rng, x.size)
        points = self._round(self._unit(x), alphas)
        bits = (raw_words(rng, x.size) < self._point_thresholds[points]).astype(np.int64)
        return self._flip(bits, rng)

    def rounded_points(self, values: Any, *, permanent: KeyedSource) -> npt.NDArray[np.int64]:
        """The index j in [0, buckets] of each value's rounded point, with the device's alpha."""
        x = check_scalar_values(values)
        source = check_keyed_source(permanent, self.name).source(ALPHA_LABEL, 0)
        alpha = raw_words(source, 1)
        return self._round(self._unit(x), np.broadcast_to(alpha, x.shape))

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]:
        """The ledger's key of each value: its rounded point, keyed by the source."""
        keys = check_keyed_source(permanent, self.name)
        points = self.rounded_points(values, permanent=keys)
        return [keys.key(BIT_LABEL, int(j)) for j in points.tolist()]

    def _unit(self, x: FloatArray) -> FloatArray:
        """Clip to [lower, upper] and map to t in [-1, 1]."""
        return np.clip((x - self.midpoint) / self.half_width, -1.0, 1.0)

    def _round(self, t: FloatArray, alpha_words: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """alpha-point rounding: up exactly when the fractional position exceeds alpha."""
        position = (t + 1.0) / 2.0 * self.buckets
        low = np.minimum(np.floor(position), self.buckets - 1)
        fraction = position - low
        alpha = np.asarray(alpha_words, dtype=np.float64) / float(WORD_SPAN)
        return (low + (fraction > alpha)).astype(np.int64)

    def _flip(self, bits: npt.NDArray[np.int64], rng: RandomSource | None) -> Reports:
        if self._flip_threshold == 0:
            return bits
        return bits ^ bernoulli(rng, self._flip_threshold, bits.size).astype(np.int64)

    # ---- wire ----------------------------------------------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return 0

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, 2, "bit")

    # ---- server side ---------------------------------------------------------------------------

    @cached_property
    def _scale(self) -> float:
        """(m/2) B / (1 - 2 gamma): the half-distance between the two decoded values."""
        flip = float(threshold_probability(self._flip_threshold))
        return self.half_width * self.kernel.bound / (1.0 - 2.0 * flip)

    def estimates(self, reports: Reports) -> FloatArray:
        """mid + (m/2) B (2b - 1)/(1 - 2 gamma): unbiased for the value (module docstring)."""
        bits = np.asarray(reports, dtype=np.int64)
        if bits.size and (bits.min() < 0 or bits.max() > 1):
            raise ValueError("onebitmean reports must be bits (0 or 1)")
        return np.asarray(self.midpoint + self._scale * (2.0 * bits - 1.0), dtype=np.float64)

    def variance(self, values: Any) -> FloatArray:
        """Exact per-report variance: (m/2)^2 B^2/(1-2 gamma)^2 - (x - mid)^2, x clipped."""
        x = np.clip(check_scalar_values(values), self.lower, self.upper)
        return np.asarray(self._scale**2 - (x - self.midpoint) ** 2, dtype=np.float64)

    def worst_case_variance(self) -> FloatArray:
        return np.array([self._scale**2], dtype=np.float64)


def _log(value: Fraction) -> float:
    return math.log(value.numerator) - math.log(value.denominator)
