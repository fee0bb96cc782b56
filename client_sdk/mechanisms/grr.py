"""Generalized (k-ary) randomized response; k = 2 is Warner's randomized response.

Warner, JASA 1965; Kairouz, Bonawitz, Ramage, ICML 2016; Wang et al., USENIX Security 2017
(REFERENCE.md sections 1.1-1.2). Report the true value with probability p = e^eps/(e^eps+k-1),
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
from client_sdk.mechanisms._wire import parse_int_payloads
from client_sdk.mechanisms.base import (
    EMChannel,
    FloatArray,
    FrequencyOracle,
    Reports,
    WireFormatError,
    histogram_observation,
)
from client_sdk.mechanisms.privacy import RandomizedResponseEvent
from client_sdk.randomness import (
    RandomSource,
    bernoulli,
    probability_threshold,
    threshold_probability,
    uniform_below,
)

MAX_ENUMERATED_K = 4096


@dataclasses.dataclass(frozen=True)
class GRR(FrequencyOracle):
    """k-ary randomized response. Reports are int64 values in ``[0, k)``; the wire is the int."""

    name: ClassVar[str] = "grr"
    epsilon: float
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=(1 << 53) - 1))

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
        return float((1 - self._keep_probability) / (self.k - 1))

    def privacy_event(self) -> RandomizedResponseEvent:
        """k-ary randomized response at the implemented ratio p*/q*."""
        return RandomizedResponseEvent(math.log(self.p_star) - math.log(self.q_star), self.k)

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        x = check_values(values, self.k)
        keep = bernoulli(rng, self._keep_threshold, x.size)
        # A uniform draw from the k-1 other values: draw from [0, k-1), skip over x.
        other = uniform_below(rng, self.k - 1, x.size)
        other += other >= x
        return np.where(keep, x, other)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, self.k)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.k).astype(np.int64)

    def em_channel(self) -> EMChannel:
        """Exact: the statistic is the output histogram and the channel is p* I + q* (J - I)."""
        return EMChannel.diagonal_form(
            "exact", self.k, self.p_star, self.q_star, histogram_observation
        )

    def channel_matrices(self) -> Iterator[FloatArray]:
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        p = self._keep_probability
        q = (1 - p) / (self.k - 1)
        matrix = np.full((self.k, self.k), float(q))
        np.fill_diagonal(matrix, float(p))
        yield matrix

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in (for goodness-of-fit tests)."""
        return np.asarray(reports, dtype=np.int64)
