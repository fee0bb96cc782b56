"""Randomized response inside Prio3: a device perturbs its value with the project's unary
encoding (SUE, Erlingsson, Pihur, Korolova CCS 2014; OUE, Wang et al. USENIX Security 2017),
then shards the perturbed bit vector with ``Prio3MultihotCountVec``; the FLP proves the vector is
a 0/1 vector, i.e. a possible output of the randomizer (the draft's section on
Prio3MultihotCountVec names this composition).

Privacy is the randomizer's, exactly: what any coalition of all but one Aggregator sees is the
secret-shared vector at most, a post-processing of the eps-LDP report; without collusion only the
sum of the vectors is revealed. The Aggregators' unsharded result is the support count C_v of
every item, debiased as for sue/oue: f_v = (C_v / n - q*) / (p* - q*) (docs/math/prio3.md).

``max_weight`` is ``k``: every bit vector is an output of SUE and OUE with positive probability,
so a smaller bound would refuse honest reports (or, if the device resampled, change the
randomizer's distribution and its privacy).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from client_sdk.mechanisms.base import AggregateStatistic, FloatArray
from client_sdk.mechanisms.unary import UnaryEncoding
from client_sdk.randomness import RandomSource
from client_sdk.vdaf.prio3 import InputShare, Prio3MultihotCountVec, PublicShare

__all__ = ["Prio3UnaryRR", "unary_chunk_length", "unary_measurement"]


def unary_chunk_length(k: int) -> int:
    """The default ``chunk_length`` of MultihotCountVec of length and max_weight ``k``: about the
    square root of the validity circuit's inputs (``k`` bits and the weight's ``bit_length``),
    the draft's guidance for ParallelSum's chunks."""
    return max(1, math.isqrt(k + k.bit_length()))


def unary_measurement(mechanism: UnaryEncoding, packed: Any) -> list[bool]:
    """One report of ``mechanism.perturb`` (a packed bit row) as the MultihotCountVec
    measurement: its first ``k`` bits, most significant first (``np.packbits``' order)."""
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8))[: mechanism.k]
    return [bool(b) for b in bits]


class Prio3UnaryRR:
    """``mechanism`` (an ``SUE`` or ``OUE``) composed with ``Prio3MultihotCountVec``."""

    def __init__(
        self, mechanism: UnaryEncoding, shares: int = 2, chunk_length: int | None = None
    ) -> None:
        if not isinstance(mechanism, UnaryEncoding):
            raise ValueError(
                f"mechanism must be a unary encoding (sue or oue), got {type(mechanism).__name__}"
            )
        k = mechanism.k
        chunk = chunk_length if chunk_length is not None else unary_chunk_length(k)
        self.mechanism = mechanism
        self.vdaf = Prio3MultihotCountVec(shares, k, k, chunk)

    @property
    def epsilon(self) -> float:
        """The randomizer's epsilon (``mechanism.privacy_epsilon``): the composition's."""
        return float(self.mechanism.privacy_epsilon)

    def randomize(self, value: int, *, rng: RandomSource | None = None) -> list[bool]:
        """The unary randomizer's report for ``value`` as the Prio3 measurement."""
        packed = self.mechanism.perturb(np.array([value], dtype=np.int64), rng=rng)
        return unary_measurement(self.mechanism, packed[0])

    def shard(
        self,
        ctx: bytes,
        value: int,
        nonce: bytes,
        rand: bytes | None = None,
        *,
        rng: RandomSource | None = None,
    ) -> tuple[PublicShare, list[InputShare]]:
        """Randomize, then shard; ``rand`` defaults to ``os.urandom`` (the device's CSPRNG)."""
        measurement = self.randomize(value, rng=rng)
        if rand is None:
            rand = os.urandom(self.vdaf.RAND_SIZE)
        return self.vdaf.shard(ctx, measurement, nonce, rand)

    def statistic(self, agg_result: list[int], num_measurements: int) -> AggregateStatistic:
        """The unsharded counts as the mechanism's sufficient statistic (support counts)."""
        return AggregateStatistic(np.asarray(agg_result, dtype=np.int64), num_measurements)

    def estimate(self, agg_result: list[int], num_measurements: int) -> FloatArray:
        """Unbiased frequencies from the aggregate result, as ``mechanism`` estimates them."""
        return self.mechanism.estimate_frequencies(self.statistic(agg_result, num_measurements))

    def variance(self, num_measurements: int, frequencies: Any) -> FloatArray:
        """Var[f_v] of ``estimate`` (the mechanism's exact formula)."""
        return self.mechanism.variance(num_measurements, frequencies)
