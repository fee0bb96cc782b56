"""Generalized (k-ary) randomized response; k = 2 is Warner's randomized response.

Warner, JASA 1965; Kairouz, Bonawitz, Ramage, ICML 2016; Wang et al., USENIX Security 2017
(docs/math/randomized-response.md). Report the true value with probability p = e^eps/(e^eps+k-1),
otherwise one of the k-1 other values uniformly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import parse_int_payloads, widest_int
from client_sdk.mechanisms.base import (
    EMChannel,
    FloatArray,
    FrequencyOracle,
    Reports,
    WireFormatError,
    histogram_observation,
)
from client_sdk.mechanisms.memoization import MAX_THRESHOLD, Chain
from client_sdk.mechanisms.privacy import RandomizedResponseEvent
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli,
    bernoulli_lazy,
    probability_threshold,
    threshold_probability,
    uniform_below,
    uniform_below_32,
)

MAX_ENUMERATED_K = 4096


def keep_or_other(
    rng: RandomSource | None,
    values: npt.NDArray[np.int64],
    keep_threshold: int,
    size: int,
    *,
    draw_for_two: bool = False,
) -> npt.NDArray[np.int64]:
    """The randomized-response step over [0, size): keep each value with probability
    ``threshold_probability(keep_threshold)``, otherwise report one of the size-1 others uniformly.

    The uniform other is drawn from [0, size-1) and skips over the value. With size = 2 the other
    is simply 1 - value; ``draw_for_two`` still draws (and ignores) that uniform word, as
    :class:`GRR` always has, so that its seeded and memoized outputs stay what they were.
    Local hashing and the longitudinal chains run this step over hash buckets and permanent values.
    """
    keep = bernoulli(rng, keep_threshold, values.size)
    if size == 2 and not draw_for_two:
        return np.where(keep, values, 1 - values)
    other = uniform_below(rng, size - 1, values.size)
    other += other >= values
    return np.where(keep, values, other)


def keep_or_other_compact(
    rng: RandomSource | None, values: npt.NDArray[np.int64], keep_threshold: int, size: int
) -> npt.NDArray[np.int64]:
    """:func:`keep_or_other`'s distribution from about 8 + 16 random bits per value instead of
    128: the keep bit by :func:`~client_sdk.randomness.bernoulli_lazy` (the same threshold) and
    the uniform other by :func:`~client_sdk.randomness.uniform_below_32` (exactly uniform), for
    reports that are never memoized (a memoized value must be recomputed from the same stream,
    so :func:`keep_or_other` keeps its own). ``size`` is at most 2**32 + 1."""
    keep = bernoulli_lazy(rng, keep_threshold, values.size)
    if size == 2:
        return np.where(keep, values, 1 - values)
    other = uniform_below_32(rng, size - 1, values.size)
    other += other >= values
    return np.where(keep, values, other)


def other_probability(keep: Fraction, size: int) -> Fraction:
    """q = (1 - p)/(size - 1): the probability of each value other than the true one."""
    return (1 - keep) / (size - 1)


def grr_matrix(keep: Fraction, size: int) -> FloatArray:
    """The (size, size) channel of :func:`keep_or_other`: p on the diagonal, q elsewhere."""
    matrix = np.full((size, size), float(other_probability(keep, size)))
    np.fill_diagonal(matrix, float(keep))
    return matrix


def compose_keep(first: Fraction, second: Fraction, size: int) -> tuple[Fraction, Fraction]:
    """(P', Q'): randomized response with keep probability ``first``, then again with ``second``,
    over ``size`` symbols. P' = p1 p2 + (1-p1) q2 and Q' = q1 p2 + (1-q1) q2."""
    q1, q2 = other_probability(first, size), other_probability(second, size)
    return first * second + (1 - first) * q2, q1 * second + (1 - q1) * q2


class RandomizedResponseChain(Chain):
    """L-GRR: randomized response over [size] applied to a memoized randomized response.

    RAPPOR's chain on a k-ary value (Erlingsson, Pihur, Korolova, CCS 2014; multi-freq-ldpy's
    L-GRR): one report is randomized response with P', Q' of :func:`compose_keep`, so
    epsilon_1 = ln(P'/Q') (docs/math/memoization.md). ``permanent_keep`` is the permanent
    step's implemented keep probability.
    """

    kind = "l-grr"

    def __init__(
        self, inner: FrequencyOracle, target: Fraction, *, permanent_keep: Fraction, size: int
    ) -> None:
        self.permanent_keep, self.size = permanent_keep, size
        super().__init__(inner, target)

    def threshold_range(self) -> tuple[int, int]:
        return -(-WORD_SPAN // self.size), MAX_THRESHOLD

    def ratio(self, threshold: int) -> Fraction:
        big, small = compose_keep(self.permanent_keep, threshold_probability(threshold), self.size)
        return big / small

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        values = np.asarray(permanent, dtype=np.int64)
        return keep_or_other(rng, values, self.threshold, self.size)

    @property
    def resend_probability(self) -> Fraction:
        """The keep probability p2: otherwise another value is sent, never the permanent one."""
        return self.parameter

    def linkability(self) -> str:
        p2 = float(self.parameter)
        return (
            "no deterministic component; reports of one value are i.i.d. given the permanent "
            f"response, each equal to it with probability p2 = {p2:.4g} and otherwise a uniform "
            f"other of the {self.size} values"
        )

    def support(self) -> tuple[Fraction, Fraction]:
        return compose_keep(self.permanent_keep, self.parameter, self.size)

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        return np.asarray(permanent_channel @ grr_matrix(self.parameter, self.size))


@dataclasses.dataclass(frozen=True)
class GRR(FrequencyOracle):
    """k-ary randomized response. Reports are int64 values in ``[0, k)``; the wire is the int."""

    name: ClassVar[str] = "grr"
    epsilon: float
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=(1 << 53) - 1))

    def bootstrap_support(
        self,
        cells: npt.NDArray[np.int64],
        devices: npt.NDArray[np.int64],
        p: float,
        q: float,
        rng: np.random.Generator,
    ) -> npt.NDArray[np.int64]:
        """One report supports one item: p I + q (J - I) = size q U + (p - q) I, so a report
        moves to a uniform item with probability size q and keeps its own otherwise."""
        size = cells.shape[1]
        moved = rng.binomial(cells, size * q)
        uniform = rng.multinomial(moved.sum(axis=1), np.full(size, 1 / size))
        return np.asarray(cells - moved + uniform, dtype=np.int64)

    # The keep probability is rounded *down* to the 2**-64 grid of the sampler, so the ratio
    # p(k-1)/(1-p) of the implemented channel never exceeds e^eps.
    @cached_property
    def _keep_threshold(self) -> int:
        e = math.exp(self.epsilon)
        return probability_threshold(Fraction(e) / (Fraction(e) + self.k - 1), rounding="down")

    @cached_property
    def _keep_probability(self) -> Fraction:
        return threshold_probability(self._keep_threshold)

    @property
    def p_star(self) -> float:
        return float(self._keep_probability)

    @property
    def q_star(self) -> float:
        return float(other_probability(self._keep_probability, self.k))

    def privacy_event(self) -> RandomizedResponseEvent:
        """k-ary randomized response at the implemented ratio p*/q*."""
        return RandomizedResponseEvent(math.log(self.p_star) - math.log(self.q_star), self.k)

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        x = check_values(values, self.k)
        return keep_or_other(rng, x, self._keep_threshold, self.k, draw_for_two=True)

    def perturb_compact(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """The reports of :meth:`perturb` (the same distribution) from fewer random bits
        (:func:`keep_or_other_compact`); ``perturb`` keeps the stream memoized reports need."""
        x = check_values(values, self.k)
        return keep_or_other_compact(rng, x, self._keep_threshold, self.k)

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return widest_int(0, self.k)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, self.k)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.k).astype(np.int64)

    def memoization_chain(self, target: Fraction) -> Chain:
        """L-GRR: randomized response over [k] on the memoized value."""
        return RandomizedResponseChain(
            self, target, permanent_keep=self._keep_probability, size=self.k
        )

    def em_channel(self) -> EMChannel:
        """Exact: the statistic is the output histogram and the channel is p* I + q* (J - I)."""
        return EMChannel.diagonal_form(
            "exact", self.k, self.p_star, self.q_star, histogram_observation
        )

    def channel_matrices(self) -> Iterator[FloatArray]:
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        yield grr_matrix(self._keep_probability, self.k)

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in (for goodness-of-fit tests)."""
        return np.asarray(reports, dtype=np.int64)
