"""Key-value data: PCKV-GRR with padding-and-sampling (Gu, Li, Cheng, Xiong & Cao, USENIX
Security 2020; docs/math/richer-data.md).

A value is a mapping key index in [0, k) -> number in [-1, 1] (a sequence of them for
``perturb``). The device pads its pairs with the ``padding`` (l) dummy keys k..k+l-1 (value 0) to
max(|S|, l) items and samples one uniformly; the value v becomes x = +1 with probability
(1 + v)/2, else -1; then with probability a it keeps the key (and keeps x with probability p,
flipping it otherwise), otherwise it sends a uniform other key of the k + l and a uniform sign:

    a = (l(e^eps - 1) + 2) / (l(e^eps - 1) + 2(k + l)),
    p = (l(e^eps - 1) + 1) / (l(e^eps - 1) + 2),
    b = (1 - a) / (k + l - 1)   (the probability of each other key).

The report is one integer 2 * key + (x == +1). The paper's privacy claim uses the amplification
from sampling one of l items; ``channel_matrices`` enumerates every key set with every sign
pattern (the extreme values; any value is a mixture of them) for small k and l, and the exact
worst ratio is checked against epsilon.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import parse_int_payloads
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.grid import exp_below
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    probability_threshold,
    raw_words,
    uniform_below,
)

MAX_K = 1 << 16
MAX_ENUMERATED_INPUTS = 1 << 10


@dataclasses.dataclass(frozen=True)
class PCKV(Mechanism):
    """Config: ``{"mechanism": "pckv", "epsilon", "k", "padding"}`` (padding l >= 1)."""

    name: ClassVar[str] = "pckv"
    value_kind: ClassVar[Literal["category", "number", "string", "record"]] = "record"
    estimate_kind: ClassVar[str] = "key-value"

    epsilon: float
    k: int
    padding: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2, maximum=MAX_K))
        object.__setattr__(
            self, "padding", check_int(self.padding, "padding", minimum=1, maximum=MAX_K)
        )

    # ---- parameters (implemented) --------------------------------------------------------------

    @property
    def keys(self) -> int:
        """k + l: real and dummy keys."""
        return self.k + self.padding

    @cached_property
    def _thresholds(self) -> tuple[int, int]:
        """(keep key, keep sign) thresholds, both rounded down (towards less information)."""
        e = Fraction(exp_below(self.epsilon))
        el = self.padding * (e - 1)
        a = (el + 2) / (el + 2 * self.keys)
        p = (el + 1) / (el + 2)
        return probability_threshold(a, rounding="down"), probability_threshold(p, rounding="down")

    @property
    def a(self) -> float:
        return self._thresholds[0] / WORD_SPAN

    @property
    def p(self) -> float:
        return self._thresholds[1] / WORD_SPAN

    @property
    def b(self) -> float:
        return (1 - self.a) / (self.keys - 1)

    # ---- device side -------------------------------------------------------------------------

    def check_records(self, values: Any) -> list[dict[int, float]]:
        if isinstance(values, Mapping) or not isinstance(values, Sequence):
            raise ValueError("values must be a sequence of mappings key index -> number")
        out = []
        for position, record in enumerate(values):
            if not isinstance(record, Mapping):
                raise ValueError(
                    f"the value at position {position} must be a mapping key -> number; "
                    f"got a {type(record).__name__}"
                )
            pairs: dict[int, float] = {}
            for key, number in record.items():
                if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
                    raise ValueError(f"the value at position {position} has a non-integer key")
                if not 0 <= int(key) < self.k:
                    raise ValueError(
                        f"the value at position {position} has a key outside [0, {self.k})"
                    )
                if isinstance(number, bool) or not isinstance(number, (int, float, np.number)):
                    raise ValueError(
                        f"the value at position {position}, key {int(key)}, must be a number"
                    )
                if not (math.isfinite(float(number)) and -1 <= float(number) <= 1):
                    raise ValueError(
                        f"the value at position {position}, key {int(key)}, must be in [-1, 1]"
                    )
                pairs[int(key)] = float(number)
            out.append(pairs)
        return out

    def encode_records(self, records: Sequence[Any]) -> list[dict[int, float]]:
        """What the client records: checked mappings (errors never echo a value)."""
        return self.check_records(records)

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        records = self.check_records(values)
        n = len(records)
        sizes = np.array([len(r) for r in records], dtype=np.int64)
        slots = uniform_below(rng, np.maximum(sizes, self.padding), n) if n else sizes
        dummy = uniform_below(rng, self.padding, n) + self.k
        keys = np.where(slots < sizes, 0, dummy)
        values_chosen = np.zeros(n)
        for i in np.flatnonzero(slots < sizes):  # the sampled pair (a device holds a few)
            key, number = list(records[i].items())[int(slots[i])]
            keys[i], values_chosen[i] = key, number
        scaled = np.minimum(np.floor((1 + values_chosen) / 2 * 2.0**64), math.nextafter(2.0**64, 0))
        plus = (raw_words(rng, n) < scaled.astype(np.uint64)) | (values_chosen >= 1.0)
        keep = raw_words(rng, n) < np.uint64(self._thresholds[0])
        keep_sign = raw_words(rng, n) < np.uint64(self._thresholds[1])
        other = uniform_below(rng, self.keys - 1, n)
        other = np.where(other < keys, other, other + 1)
        random_sign = uniform_below(rng, 2, n).astype(bool)
        out_key = np.where(keep, keys, other)
        out_sign = np.where(keep, np.where(keep_sign, plus, ~plus), random_sign)
        return np.asarray(2 * out_key + out_sign.astype(np.int64), dtype=np.int64)

    # ---- wire --------------------------------------------------------------------------------

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(v) for v in np.asarray(reports, dtype=np.int64)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, 2 * self.keys, "output")

    # ---- server side -------------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(2 * self.keys, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        outputs = np.asarray(reports, dtype=np.int64).reshape(-1)
        return AggregateStatistic(np.bincount(outputs, minlength=2 * self.keys), outputs.size)

    def _counts(self, statistic: AggregateStatistic) -> tuple[FloatArray, FloatArray, int]:
        if statistic.n <= 0:
            raise ValueError("cannot estimate from zero reports")
        counts = np.asarray(statistic.counts, dtype=np.float64).reshape(self.keys, 2)[: self.k]
        return counts[:, 1], counts[:, 0], statistic.n  # n1 (+1), n2 (-1)

    def frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """f_k = l ((n1 + n2)/n - b) / (a - b): unbiased when every |S| <= l."""
        n1, n2, n = self._counts(statistic)
        return np.asarray(self.padding * ((n1 + n2) / n - self.b) / (self.a - self.b))

    def frequency_variance(self, n: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var[f_k] for a fixed population (|S| <= l): p* = b + (a - b)/l, q* = b."""
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = self.b + (self.a - self.b) / self.padding, self.b
        return np.asarray((q * (1 - q) + f * (p * (1 - p) - q * (1 - q))) / (n * (p - q) ** 2))

    def means(self, statistic: AggregateStatistic) -> tuple[FloatArray, FloatArray]:
        """(mean, delta-method standard error) per key: m = (N1 - N2) / S with N the 2x2 solve
        of the paper and S = n f / l, clipped to [-1, 1]."""
        n1, n2, n = self._counts(statistic)
        a, b, p = self.a, self.b, self.p
        difference = (n1 - n2) / (a * (2 * p - 1))
        total = (n1 + n2 - n * b) / (a - b)
        safe = np.maximum(total, 1.0)
        ratio = np.clip(difference / safe, -1.0, 1.0)
        # multinomial covariance of (n1, n2) at the observed shares
        pi1, pi2 = n1 / n, n2 / n
        var1, var2, cov = n * pi1 * (1 - pi1), n * pi2 * (1 - pi2), -n * pi1 * pi2
        cd, cs = 1 / (a * (2 * p - 1)), 1 / (a - b)
        var_d = cd**2 * (var1 + var2 - 2 * cov)
        var_s = cs**2 * (var1 + var2 + 2 * cov)
        cov_ds = cd * cs * (var1 - var2)
        variance = (var_d - 2 * ratio * cov_ds + ratio**2 * var_s) / safe**2
        return np.asarray(ratio), np.asarray(np.sqrt(np.maximum(variance, 0.0)))

    # ---- privacy -----------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def output_distribution(self, pairs: Mapping[int, int]) -> FloatArray:
        """P[output] for a key set with signs +-1 (the extreme values), as implemented."""
        a, p, b = self.a, self.p, self.b
        size = max(len(pairs), self.padding)
        items = [(key, 1.0 if sign > 0 else 0.0) for key, sign in pairs.items()]
        dummies = self.padding - min(len(pairs), self.padding)  # dummy slots, uniform dummy key
        out = np.zeros(2 * self.keys)
        for key, plus in items:
            out += self._item_distribution(key, plus, a, p, b) / size
        for dummy in range(self.k, self.keys):
            out += self._item_distribution(dummy, 0.5, a, p, b) * dummies / size / self.padding
        return out

    def _item_distribution(self, key: int, plus: float, a: float, p: float, b: float) -> FloatArray:
        out = np.full(2 * self.keys, b / 2)
        out[2 * key + 1] = a * (plus * p + (1 - plus) * (1 - p))
        out[2 * key] = a * (plus * (1 - p) + (1 - plus) * p)
        return out

    def channel_matrices(self) -> Iterator[FloatArray]:
        inputs: list[dict[int, int]] = []
        for size in range(self.k + 1):
            for subset in itertools.combinations(range(self.k), size):
                for signs in itertools.product((-1, 1), repeat=size):
                    inputs.append(dict(zip(subset, signs, strict=True)))
                    if len(inputs) > MAX_ENUMERATED_INPUTS:
                        raise ValueError("too many key sets to enumerate")
        yield np.array([self.output_distribution(pairs) for pairs in inputs])

    def implemented_epsilon(self) -> float:
        (matrix,) = list(self.channel_matrices())
        high, low = matrix.max(axis=0), matrix.min(axis=0)
        return float(np.max(np.log(high) - np.log(low)))
