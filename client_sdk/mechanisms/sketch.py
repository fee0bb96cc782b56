"""Sketch oracles over any string: Apple's Count Mean Sketch (CMS) and Hadamard CMS (HCMS).

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017; docs/math/heavy-hitters.md. A sketch has ``hashes`` rows of width ``m`` (a
power of two) and a public hash family ``h_0 .. h_{hashes-1}`` from strings to [0, m), fixed by
the config's ``seed`` (below). A device holding the string d picks a row j uniformly and

- **cms**: builds v in {-1, +1}^m with v[h_j(d)] = +1 and -1 elsewhere, flips each coordinate
  independently with probability 1/(1 + e^(eps/2)), and sends (j, v~) (v~ as m bits, 1 for +1);
- **hcms**: picks a column l uniformly, and sends (j, l, b) where b is H_m[h_j(d), l] (the
  Sylvester Hadamard entry, (-1)^popcount(h_j(d) & l)) flipped with probability 1/(1 + e^eps).

The flip probabilities are thresholds on 64-bit words (``client_sdk.randomness``), rounded up,
so the implemented odds ratio of a coordinate is at most e^(eps/2) (cms: two inputs differ in at
most two coordinates) or e^eps (hcms: one signed bit), and every estimate uses the implemented
probability. The row and the column are uniform and independent of the value.

The hash family (part of the wire contract: stored reports are decoded with it):
h_l(d) = (little-endian uint32 number l of BLAKE2b(d, key = KEY_PREFIX || seed as 8 bytes
big-endian, digest_size = 4 * hashes)) mod m. With m a power of two the reduction is exact.

Server side (Apple's debiasing, with the integer statistic the reports add up to): per row j,
X[j, i] is the debiased sum of the reports of row j at cell i, and the count estimate of a
string d is c^(d) = m/(m-1) * (sum_j X[j, h_j(d)] - n/m). Its exact mean and variance for the
fixed hash functions, and over a random hash family, are in docs/math/heavy-hitters.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import (
    bits_text,
    decode_bits,
    encode_bits,
    is_plain_int,
    parse_int_payloads,
    widest_int,
)
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
    claim_event,
)
from client_sdk.mechanisms.memoization import KeyedSource, log_fraction
from client_sdk.mechanisms.privacy import ChannelEvent, PrivacyEvent
from client_sdk.mechanisms.strings import (
    MemoizedStrings,
    composed_flip,
    distinct_strings,
    flip_again_threshold,
    memo_label,
)
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli_lazy,
    probability_threshold,
    threshold_probability,
    uniform_below,
    uniform_below_32,
)

__all__ = [
    "CMS",
    "HCMS",
    "KEY_PREFIX",
    "MAX_LENGTH",
    "HeavySetCorrection",
    "MemoizedCMS",
    "MemoizedHCMS",
    "StringSketch",
    "distinct_strings",
]

KEY_PREFIX = b"ldp-telemetry/sketch/v1"
"""The BLAKE2b key of the hash family starts with this (then the seed)."""

MAX_LENGTH = 1024
"""Largest ``max_length`` (bytes of a value's UTF-8 encoding) a config may set."""

MAX_WIDTH = 1 << 16
MAX_HASHES = 16
"""At most 16 rows: one BLAKE2b digest (64 bytes) gives every row its 32-bit word."""

MAX_SEED = 1 << 53
MAX_ENUMERATED_INPUTS = 4096
"""Largest m**hashes (inputs of the exact privacy check) ``channel_matrices`` enumerates."""

CHUNK_CELLS = 1 << 23
"""Report cells randomized per chunk (an 8 MiB boolean array at most)."""


@dataclasses.dataclass(frozen=True)
class StringSketch(Mechanism):
    """What CMS and HCMS share: the config, the hash family, the estimate and its variance.

    Config fields: ``epsilon``; ``m`` the sketch width (a power of two, 2 to 65536); ``hashes``
    the rows (1 to 16); ``max_length`` the most bytes of a value's UTF-8 encoding (1 to 1024);
    ``seed`` which member of the hash family the campaign uses (an integer in [0, 2**53)).
    """

    epsilon: float
    m: int
    hashes: int
    max_length: int = 64
    seed: int = 0

    value_kind: ClassVar[Literal["category", "number", "string"]] = "string"
    estimate_kind: ClassVar[str] = "sketch"
    tests_candidates: ClassVar[bool] = True

    def __post_init__(self) -> None:
        epsilon = check_epsilon(self.epsilon)
        m = check_int(self.m, "m", minimum=2, maximum=MAX_WIDTH)
        if m & (m - 1):
            raise ValueError(f"m must be a power of two; got {self.m!r}")
        hashes = check_int(self.hashes, "hashes", minimum=1, maximum=MAX_HASHES)
        max_length = check_int(self.max_length, "max_length", minimum=1, maximum=MAX_LENGTH)
        seed = check_int(self.seed, "seed", minimum=0, maximum=MAX_SEED - 1)
        for field, value in (
            ("epsilon", epsilon),
            ("m", m),
            ("hashes", hashes),
            ("max_length", max_length),
            ("seed", seed),
        ):
            object.__setattr__(self, field, value)

    # ---- the hash family --------------------------------------------------------------------

    def hash_table(self, values: Sequence[bytes]) -> npt.NDArray[np.int64]:
        """h_l(d) for every value (UTF-8 bytes) and row: shape ``(len(values), hashes)``."""
        key = KEY_PREFIX + self.seed.to_bytes(8, "big")
        size = 4 * self.hashes
        digests = b"".join(hashlib.blake2b(v, digest_size=size, key=key).digest() for v in values)
        words = np.frombuffer(digests, dtype="<u4").reshape(len(values), self.hashes)
        return (words & np.uint32(self.m - 1)).astype(np.int64)

    def candidate_table(self, candidates: Sequence[str]) -> npt.NDArray[np.int64]:
        """``hash_table`` of candidate strings (any length: candidates are not reports)."""
        for index, value in enumerate(candidates):
            if not isinstance(value, str):
                raise ValueError(f"candidates[{index}] must be a string; got {value!r}")
        return self.hash_table([v.encode("utf-8") for v in candidates])

    # ---- what each mechanism supplies -------------------------------------------------------

    @property
    def flip_probability(self) -> Fraction:
        """The implemented probability that a report's sign is flipped (per coordinate)."""
        return threshold_probability(self._flip_threshold)

    @property
    def _flip_threshold(self) -> int:
        raise NotImplementedError

    @property
    def debias_factor(self) -> float:
        """c = 1/(1 - 2 q): a flipped +-1 sign times c has the true sign as its mean."""
        return float(1 / (1 - 2 * self.flip_probability))

    def debiased_sums(self, statistic: AggregateStatistic) -> FloatArray:
        """X[j, i]: the sum over the reports of row j of their unbiased cell-i indicators."""
        raise NotImplementedError

    @property
    def flip_noise(self) -> float:
        """a: the covariance of one report's contributions Y(x), Y(y) to two strings' sums is
        a z_xy + b w - z_xd z_yd (w the rate of rows where x, y and the report's d share a cell);
        a from the flips (cms: (c^2 - 1)/4, hcms: c^2)."""
        raise NotImplementedError

    @property
    def row_noise(self) -> int:
        """b: 1 where the reported cell's indicator is random given the row (cms), else 0."""
        raise NotImplementedError

    def report_variance(self, z: FloatArray) -> FloatArray:
        """Var of one report's contribution to sum_j X[j, h_j(d)], given its collision rate z:
        a + b z - z^2 (cms: (c^2 - 1)/4 + z(1 - z); hcms: c^2 - z^2)."""
        z = np.asarray(z, dtype=np.float64)
        return np.asarray(self.flip_noise + self.row_noise * z - z * z, dtype=np.float64)

    def report_variance_expected(self, second: float) -> float:
        """E over a random hash of ``report_variance(z)`` for a non-holder, given E[z^2]."""
        return self.flip_noise + self.row_noise / self.m - second

    # ---- estimates ----------------------------------------------------------------------------

    @property
    def scale(self) -> float:
        """m/(m-1): undoes the n/m that the other reports add to a cell on average."""
        return self.m / (self.m - 1)

    def estimate_counts(
        self, statistic: AggregateStatistic, candidates: Sequence[str]
    ) -> FloatArray:
        """c^(d) = m/(m-1) (sum_j X[j, h_j(d)] - n/m) for each candidate (Apple 2017)."""
        return self.estimate_from_table(statistic, self.candidate_table(candidates))

    def estimate_from_table(
        self, statistic: AggregateStatistic, table: npt.NDArray[np.int64]
    ) -> FloatArray:
        """``estimate_counts`` of the strings whose ``hash_table`` rows are ``table``."""
        sums = self.debiased_sums(statistic)
        gathered = sums[np.arange(self.hashes)[None, :], table].sum(axis=1)
        return np.asarray(self.scale * (gathered - statistic.n / self.m), dtype=np.float64)

    def fixed_hash_moments(
        self,
        targets: Sequence[str],
        population: Sequence[str],
        counts: npt.ArrayLike,
    ) -> tuple[FloatArray, FloatArray]:
        """Exact mean and variance of ``estimate_counts`` for this config's hash functions.

        ``population`` lists the distinct strings the devices hold and ``counts`` how many hold
        each. With z_{d'} = #{l : h_l(d') = h_l(d)}/hashes, E = m/(m-1)(sum n_d' z_d' - n/m) and
        Var = (m/(m-1))^2 sum_d' n_d' Var_1(z_d') (docs/math/heavy-hitters.md).
        """
        n_of = np.asarray(counts, dtype=np.float64)
        target = self.candidate_table(targets)
        held = self.candidate_table(population)
        z = (target[:, None, :] == held[None, :, :]).mean(axis=2)
        n = float(n_of.sum())
        mean = self.scale * (z @ n_of - n / self.m)
        variance = self.scale**2 * (self.report_variance(z) @ n_of)
        return np.asarray(mean, dtype=np.float64), np.asarray(variance, dtype=np.float64)

    def collision_moments(self) -> tuple[float, float]:
        """(E[z^2], Var[z]) of another string's collision rate z under a random hash family:
        hashes * z ~ Binomial(hashes, 1/m)."""
        p, k = 1 / self.m, self.hashes
        var = p * (1 - p) / k
        return var + p * p, var

    def null_detection_frequency(self, n: int, critical: float) -> tuple[float, str] | None:
        """The null variance of :meth:`count_variance` with every other report a distinct
        string (the fewest collisions): a lower bound of the frequency called at ``critical``."""
        variance = self.count_variance(n, np.zeros(1), np.full(1, float(n)))
        frequency = critical * math.sqrt(float(variance[0])) / n
        note = "the sketch's null variance with no other repeated string (a lower bound)"
        return frequency, note

    def count_variance(self, n: int, counts: FloatArray, others_square: FloatArray) -> FloatArray:
        """Var[c^(d)] over the reports' noise and a random hash family (heavy-hitters.md).

        ``counts`` n_d of the strings asked about; ``others_square`` the sum of n_d'^2 over the
        other strings. The noise of the reports, plus the collisions of the other strings'
        reports with d's cells, plus the spread of their mean over the hash functions
        (``HeavySetCorrection.variance`` with no heavy set).
        """
        n_d = np.asarray(counts, dtype=np.float64)
        one = np.ones_like(n_d)
        return _corrected_variance(
            self,
            n,
            one,
            one,
            np.zeros_like(n_d),
            np.zeros_like(n_d),
            n_d,
            one,
            n - n_d,
            np.asarray(others_square, dtype=np.float64),
        )

    def collision_rates(
        self, table: npt.NDArray[np.int64], heavy_table: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], FloatArray]:
        """The pairs (x, d) of a row of ``table`` and one of ``heavy_table`` sharing a cell in at
        least one hash row, x-major, with z_xd = rows shared / hashes (the others have z = 0)."""
        size = heavy_table.shape[0]
        keys = []
        for row in range(self.hashes):
            cells = heavy_table[:, row]
            order = np.argsort(cells, kind="stable")
            low = np.searchsorted(cells[order], table[:, row], side="left")
            many = np.searchsorted(cells[order], table[:, row], side="right") - low
            total = int(many.sum())
            if total:
                x = np.repeat(np.arange(table.shape[0], dtype=np.int64), many)
                shift = np.repeat(low - (np.cumsum(many) - many), many)
                keys.append(x * size + order[np.arange(total) + shift])
        if not keys:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        unique, shared = np.unique(np.concatenate(keys), return_counts=True)
        return unique // size, unique % size, shared / self.hashes

    def correct_for_heavy(
        self,
        statistic: AggregateStatistic,
        table: npt.NDArray[np.int64],
        heavy: npt.ArrayLike,
    ) -> HeavySetCorrection:
        """The estimates of the strings of ``table`` debiased through the exact collisions of
        this config's hash functions with the heavy set D = ``heavy`` (indices into ``table``).

        E[c^(x)] = sum_y A[x, y] n_y with A[x, y] = m/(m-1)(z_xy - 1/m) for the fixed hashes
        (``fixed_hash_moments``). n^_D solves A_DD n^_D = c^_D; every other string gets
        c^(x) - A[x, D] n^_D. Each corrected estimate is a linear combination L_x . c^ with
        L_x[x] = 1 (x not in D), so E = n_x + sum over y outside D of A[x, y] n_y: unbiased
        when the strings outside D hold nothing, the rest of the bias is what the variance
        treats as a random family's (heavy-hitters.md, "Significance").
        """
        raw = self.estimate_from_table(statistic, table)
        return HeavySetCorrection.build(self, statistic.n, raw, table, heavy)

    def standard_errors(
        self,
        statistic: AggregateStatistic,
        candidates: Sequence[str],
        *,
        null: bool = False,
        heavy: npt.ArrayLike = (),
    ) -> FloatArray:
        """Standard errors of the estimates of ``candidates`` corrected for the heavy set
        ``heavy`` (``correct_for_heavy``; none: ``estimate_counts``), in counts.

        ``null``: the standard error of a candidate held by no one (its own count 0), which the
        significance test uses. The plug-ins and what they assume: ``HeavySetCorrection``.
        """
        correction = self.correct_for_heavy(statistic, self.candidate_table(candidates), heavy)
        return correction.standard_errors(null=null)

    # ---- privacy ------------------------------------------------------------------------------

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def privacy_event(self) -> PrivacyEvent:
        """The exact channel (``channel_matrices``), or the claim where it is too large."""
        return ChannelEvent(self, fallback=claim_event(self))

    def _hash_inputs(self) -> npt.NDArray[np.int64]:
        """Every tuple (h_0(d), ..., h_{hashes-1}(d)) a string can have: the channel's inputs."""
        if self.m**self.hashes > MAX_ENUMERATED_INPUTS:
            raise ValueError(
                f"{self.name}: m**hashes = {self.m**self.hashes} inputs are too many to enumerate"
            )
        grid = itertools.product(range(self.m), repeat=self.hashes)
        return np.asarray(list(grid), dtype=np.int64).reshape(-1, self.hashes)

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[output | the string's hash tuple] over every tuple in [m]^hashes: every string."""
        raise NotImplementedError

    def implemented_epsilon(self) -> float:
        """max ln(P[y|x]/P[y|x']) over ``channel_matrices`` (as for every oracle)."""
        return FrequencyOracle.implemented_epsilon(self)  # type: ignore[arg-type]

    # ---- common device-side pieces ----------------------------------------------------------

    def _buckets(
        self, values: Any, rng: RandomSource | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(row j, h_j(value)) of each value, j uniform."""
        return self.encoded_buckets(*distinct_strings(values, self.max_length, self.name), rng)

    def encoded_buckets(
        self, distinct: Sequence[bytes], inverse: npt.NDArray[np.int64], rng: RandomSource | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(row j, h_j(value)) of values given as distinct byte strings and an index into them."""
        n = inverse.size
        rows = (
            uniform_below_32(rng, self.hashes, n)
            if self.hashes > 1
            else np.zeros(n, dtype=np.int64)
        )
        if not n:
            return rows, rows
        table = self.hash_table(distinct)
        return rows, table[inverse, rows]


@dataclasses.dataclass(frozen=True)
class CMS(StringSketch):
    """Apple's Count Mean Sketch (module docstring). Reports: ``row`` and ``bits`` (the m signs
    packed with ``numpy.packbits``, 1 for +1); wire ``{"row": j, "bits": "<base64>"}``."""

    name: ClassVar[str] = "cms"

    @staticmethod
    def longitudinal_variant() -> type[MemoizedCMS]:
        """The class of this mechanism under ``"longitudinal"``."""
        return MemoizedCMS

    @cached_property
    def _flip_threshold(self) -> int:
        # Rounded up: (1 - q)/q <= e^(eps/2) per coordinate.
        return probability_threshold(
            Fraction(1) / (1 + Fraction(math.exp(self.epsilon / 2))), rounding="up"
        )

    @property
    def report_bytes(self) -> int:
        return (self.m + 7) // 8

    @property
    def report_dtype(self) -> np.dtype[Any]:
        return np.dtype([("row", np.int32), ("bits", np.uint8, (self.report_bytes,))])

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        rows, buckets = self._buckets(values, rng)
        n = rows.size
        out = np.zeros(n, dtype=self.report_dtype)
        out["row"] = rows
        step = max(1, CHUNK_CELLS // self.m)
        for start in range(0, n, step):
            stop = min(n, start + step)
            flips = bernoulli_lazy(rng, self._flip_threshold, (stop - start, self.m))
            flips[np.arange(stop - start), buckets[start:stop]] ^= True
            out["bits"][start:stop] = np.packbits(flips, axis=1)
        return out

    def _check(self, reports: Reports) -> Reports:
        array = np.asarray(reports)
        if array.dtype != self.report_dtype or array.ndim != 1:
            raise ValueError(f"reports must be a 1-D array of dtype {self.report_dtype}")
        if array.size and (array["row"].min() < 0 or array["row"].max() >= self.hashes):
            raise ValueError(f"report rows must be in [0, {self.hashes})")
        return array

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return {"row": widest_int(0, self.hashes), "bits": bits_text(self.m)}

    def to_wire(self, reports: Reports) -> list[Any]:
        array = self._check(reports)
        bits = encode_bits(array["bits"])
        return [{"row": int(r), "bits": b} for r, b in zip(array["row"], bits, strict=True)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        errors: list[WireFormatError] = []
        rows: list[int] = []
        strings: list[Any] = []
        positions: list[int] = []
        for index, payload in enumerate(payloads):
            if not isinstance(payload, dict) or set(payload) != {"row", "bits"}:
                got = sorted(map(str, payload)) if isinstance(payload, dict) else None
                errors.append(
                    WireFormatError(
                        index,
                        "payload must be an object with exactly row and bits; got "
                        + (f"fields {got}" if got is not None else type(payload).__name__),
                    )
                )
                continue
            row = payload["row"]
            if not is_plain_int(row) or not 0 <= int(row) < self.hashes:
                errors.append(
                    WireFormatError(
                        index, f"row must be an integer in [0, {self.hashes}); got {row!r}"
                    )
                )
                continue
            rows.append(int(row))
            strings.append(payload["bits"])
            positions.append(index)
        packed, bit_errors = decode_bits(strings, self.m)
        bad = {e.index for e in bit_errors}
        errors.extend(WireFormatError(positions[e.index], e.reason) for e in bit_errors)
        errors.sort(key=lambda e: e.index)
        keep = [i for i in range(len(rows)) if i not in bad]
        out = np.zeros(len(keep), dtype=self.report_dtype)
        out["row"] = np.asarray(rows, dtype=np.int64)[keep] if keep else 0
        out["bits"] = packed
        return out, errors

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros((self.hashes, self.m + 1), dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Counts of shape (hashes, m + 1): column 0 the reports of the row, column 1 + i how
        many of them sent +1 at cell i."""
        array = self._check(reports)
        counts = np.zeros((self.hashes, self.m + 1), dtype=np.int64)
        counts[:, 0] = np.bincount(array["row"], minlength=self.hashes)
        step = max(1, CHUNK_CELLS // self.m)
        for start in range(0, array.size, step):
            chunk = array[start : start + step]
            bits = np.unpackbits(chunk["bits"], axis=1, count=self.m)
            for row in range(self.hashes):
                counts[row, 1:] += bits[chunk["row"] == row].sum(axis=0, dtype=np.int64)
        return AggregateStatistic(counts, int(array.size))

    def debiased_sums(self, statistic: AggregateStatistic) -> FloatArray:
        counts = np.asarray(statistic.counts, dtype=np.float64)
        per_row, ones = counts[:, :1], counts[:, 1:]
        c = self.debias_factor
        return np.asarray((c * (2 * ones - per_row) + per_row) / 2, dtype=np.float64)

    @property
    def flip_noise(self) -> float:
        # The flips of the queried cell: Var[(c v~ + 1)/2] = (c^2 - 1)/4.
        c = self.debias_factor
        return (c * c - 1) / 4

    @property
    def row_noise(self) -> int:
        return 1

    def channel_matrices(self) -> Iterator[FloatArray]:
        inputs = self._hash_inputs()
        q = float(self.flip_probability)
        outputs = np.asarray(list(itertools.product((0, 1), repeat=self.m)), dtype=bool)
        blocks = []
        for row in range(self.hashes):
            onehot = np.arange(self.m)[None, :] == inputs[:, row][:, None]  # (inputs, m)
            differ = (onehot[:, None, :] != outputs[None, :, :]).sum(axis=2)
            blocks.append(q**differ * (1 - q) ** (self.m - differ) / self.hashes)
        yield np.concatenate(blocks, axis=1)


@dataclasses.dataclass(frozen=True)
class HCMS(StringSketch):
    """Apple's Hadamard Count Mean Sketch (module docstring). A report is one integer,
    ``(row * m + column) * 2 + bit`` (bit 1 for +1), on the wire as it is."""

    name: ClassVar[str] = "hcms"

    @staticmethod
    def longitudinal_variant() -> type[MemoizedHCMS]:
        """The class of this mechanism under ``"longitudinal"``."""
        return MemoizedHCMS

    @cached_property
    def _flip_threshold(self) -> int:
        # Rounded up: (1 - q)/q <= e^eps.
        return probability_threshold(
            Fraction(1) / (1 + Fraction(math.exp(self.epsilon))), rounding="up"
        )

    @property
    def outputs(self) -> int:
        return 2 * self.hashes * self.m

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        return self.perturb_buckets(*self._buckets(values, rng), rng)

    def perturb_buckets(
        self, rows: npt.NDArray[np.int64], buckets: npt.NDArray[np.int64], rng: RandomSource | None
    ) -> Reports:
        """Reports of values already hashed: row j and cell h_j(value) of each."""
        n = rows.size
        columns = uniform_below_32(rng, self.m, n)
        plus = (np.bitwise_count(buckets & columns) & 1) == 0
        flips = bernoulli_lazy(rng, self._flip_threshold, n)
        return ((rows * self.m + columns) * 2 + (plus ^ flips)).astype(np.int64)

    def _check(self, reports: Reports) -> npt.NDArray[np.int64]:
        array = np.asarray(reports)
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ValueError("reports must be a 1-D integer array")
        if array.size and (array.min() < 0 or array.max() >= self.outputs):
            raise ValueError(f"reports must be in [0, {self.outputs})")
        return array.astype(np.int64)

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return widest_int(0, self.outputs)

    def to_wire(self, reports: Reports) -> list[Any]:
        return [int(r) for r in self._check(reports)]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return parse_int_payloads(payloads, self.outputs, "report")

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros((self.hashes, self.m, 2), dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Counts of shape (hashes, m, 2): reports of (row, column) with bit 0 (-1) and 1 (+1)."""
        array = self._check(reports)
        counts = np.bincount(array, minlength=self.outputs).reshape(self.hashes, self.m, 2)
        return AggregateStatistic(counts.astype(np.int64), int(array.size))

    def debiased_sums(self, statistic: AggregateStatistic) -> FloatArray:
        counts = np.asarray(statistic.counts, dtype=np.float64)
        signed = counts[..., 1] - counts[..., 0]  # (hashes, m): sum of the reported signs
        return self.debias_factor * _walsh_hadamard(signed)

    @property
    def flip_noise(self) -> float:
        # Y = c w~ H[i, l] has Y^2 = c^2 whatever the row, column and flip.
        c = self.debias_factor
        return c * c

    @property
    def row_noise(self) -> int:
        return 0

    def channel_matrices(self) -> Iterator[FloatArray]:
        inputs = self._hash_inputs()
        q = float(self.flip_probability)
        columns = np.arange(self.m)
        blocks = []
        for row in range(self.hashes):
            plus = (np.bitwise_count(inputs[:, row][:, None] & columns[None, :]) & 1) == 0
            weight = 1 / (self.hashes * self.m)  # the row and the column are uniform
            p_plus = np.where(plus, 1 - q, q) * weight  # (inputs, m)
            # Outputs in the order of the report integers: (column, bit), bit 0 first.
            pair = np.stack([weight - p_plus, p_plus], axis=2)
            blocks.append(pair.reshape(len(inputs), -1))
        yield np.concatenate(blocks, axis=1)


def _corrected_variance(
    mechanism: StringSketch,
    n: int,
    lzl: FloatArray,
    weight: FloatArray,
    heavy_rows: FloatArray,
    heavy_others: FloatArray,
    own: FloatArray,
    own_mean: FloatArray,
    light_total: FloatArray,
    light_square: FloatArray,
) -> FloatArray:
    """Var[L . c^] for the combination L of candidate estimates (heavy-hitters.md,
    "Significance"), in counts.

    ``lzl`` = L Z L (Z the collision rates of L's strings), ``weight`` = sum of L;
    ``heavy_rows`` = sum over the heavy strings d other than the target x of n_d L_x^2
    z_xd (1 - z_xd) (the choice of the row, cms); ``heavy_others`` their count;
    ``own``/``own_mean`` the target's count and L . z_x; ``light_total``/``light_square``
    the count and sum of squared counts of the other strings, taken as a random hash family's.
    """
    s, m, k = mechanism.scale, mechanism.m, mechanism.hashes
    a, b = mechanism.flip_noise, mechanism.row_noise
    mean_sq = (weight / m) ** 2
    light_report = b * lzl / m - lzl / (k * m) - (1 - 1 / k) * mean_sq
    bias_spread = (lzl / m - mean_sq) / k
    total = (
        a * n * lzl
        + b * heavy_rows
        - (1 - b) * (mean_sq * heavy_others + own * own_mean**2)
        + light_total * light_report
        + light_square * bias_spread
    )
    return np.asarray(s * s * total, dtype=np.float64)


def _pairs_within(x: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """For sorted group labels ``x``: every (left, right) pair of entries in the same group."""
    if not x.size:
        return x, x
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    sizes = np.diff(np.r_[starts, x.size])
    per = np.repeat(sizes, sizes)
    left = np.repeat(np.arange(x.size), per)
    offset = np.arange(left.size) - np.repeat(np.cumsum(per) - per, per)
    right = np.repeat(np.repeat(starts, sizes), per) + offset
    return left, right


@dataclasses.dataclass(frozen=True)
class HeavySetCorrection:
    """Candidate estimates debiased through the exact collisions with a heavy set D
    (``StringSketch.correct_for_heavy``), and their standard errors.

    ``counts[x]`` = L_x . c^: for x in D the solution of A_DD n^_D = c^_D (L_x a row of
    A_DD^-1), for the others c^(x) - A[x, D] n^_D. ``heavy`` holds D (indices into the
    candidates; strings with the same hash tuple as a heavier member of D are left out: the
    sketch cannot tell them apart). The other fields are what ``_corrected_variance`` needs.
    """

    mechanism: StringSketch
    n: int
    counts: FloatArray
    heavy: npt.NDArray[np.int64]
    lzl: FloatArray
    weight: FloatArray
    own_mean: FloatArray
    self_weight: FloatArray
    pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], FloatArray]
    heavy_rates: FloatArray

    @classmethod
    def build(
        cls,
        mechanism: StringSketch,
        n: int,
        raw: FloatArray,
        table: npt.NDArray[np.int64],
        heavy: npt.ArrayLike,
    ) -> HeavySetCorrection:
        """The correction of the raw estimates ``raw`` of the strings of ``table``."""
        size = raw.size
        order = np.asarray(heavy, dtype=np.int64).ravel()
        if order.size and (order.min() < 0 or order.max() >= size):
            raise ValueError(f"heavy must index the {size} candidates; got {order.tolist()!r}")
        order = order[np.argsort(-raw[order], kind="stable")]  # heaviest first
        _, first = np.unique(table[order], axis=0, return_index=True)
        members = np.sort(order[first]) if order.size else order
        ones = np.ones(size)
        if not members.size:
            empty = np.zeros(0, dtype=np.int64)
            return cls(
                mechanism,
                n,
                np.asarray(raw, dtype=np.float64),
                members,
                ones,
                ones,
                ones,
                ones,
                (empty, empty, np.zeros(0)),
                np.zeros((0, 0)),
            )
        s, m = mechanism.scale, mechanism.m
        x, d, z = mechanism.collision_rates(table, table[members])
        position = np.full(size, -1, dtype=np.int64)
        position[members] = np.arange(members.size)
        inner = position[x] >= 0
        rates = np.zeros((members.size, members.size))
        rates[position[x[inner]], d[inner]] = z[inner]
        matrix = s * (rates - 1 / m)
        try:
            inverse = np.linalg.inv(matrix)
        except np.linalg.LinAlgError:
            inverse = np.linalg.pinv(matrix)
        estimates = inverse @ raw[members]
        rows, columns = inverse.sum(axis=1), inverse.sum(axis=0)
        x, d, z = x[~inner], d[~inner], z[~inner]

        def per_string(weights: FloatArray) -> FloatArray:
            return np.bincount(x, weights=weights, minlength=size).astype(np.float64)

        counts = raw - s * per_string(z * estimates[d]) + s / m * estimates.sum()
        weight = 1 - (s * per_string(z * rows[d]) - s / m * rows.sum())
        left, right = _pairs_within(x)
        quadratic = np.bincount(
            x[left], weights=z[left] * inverse[d[left], d[right]] * z[right], minlength=size
        )
        gamma_z = s * quadratic - s / m * per_string(z * columns[d])  # gamma_x . z_xD
        lzl = 1 - gamma_z - weight / m * (1 - weight)
        own_mean = 1 - gamma_z
        self_weight = ones.copy()
        counts[members] = estimates
        weight[members] = rows
        diagonal = np.diag(inverse)
        lzl[members] = diagonal / s + rows**2 / m
        own_mean[members] = 1 / s + rows / m
        self_weight[members] = diagonal
        return cls(
            mechanism,
            n,
            np.asarray(counts, dtype=np.float64),
            members,
            lzl,
            weight,
            own_mean,
            self_weight,
            (x, d, z),
            rates,
        )

    def variances(self, *, null: bool = False) -> FloatArray:
        """Var of ``counts`` over the reports' noise, with plug-ins: D's estimates (clipped to
        [0, n]) for its counts with its exact collisions; the other candidates' estimates
        (clipped, scaled down to fit in n) and the rest of the reports as strings held by one
        device each, their collisions a random family's. ``null``: the target's own count 0."""
        n = float(self.n)
        heavy_counts = np.clip(self.counts[self.heavy], 0.0, n)
        if heavy_counts.sum() > n:
            heavy_counts *= n / heavy_counts.sum()
        heavy_total = float(heavy_counts.sum())
        light = np.ones(self.counts.size, dtype=bool)
        light[self.heavy] = False
        plug = np.where(light, np.clip(self.counts, 0.0, n), 0.0)
        room = max(n - heavy_total, 0.0)
        if plug.sum() > room:  # then plug.sum() > 0
            plug *= room / plug.sum()
        rest = max(n - heavy_total - float(plug.sum()), 0.0)
        square = float(np.sum(plug**2)) + rest
        counts = np.zeros(self.counts.size)
        counts[self.heavy] = heavy_counts
        x, d, z = self.pairs
        heavy_rows = np.bincount(
            x, weights=heavy_counts[d] * z * (1 - z), minlength=counts.size
        ).astype(np.float64)
        heavy_rows[self.heavy] = (self.heavy_rates * (1 - self.heavy_rates)) @ heavy_counts
        heavy_rows *= self.self_weight**2
        heavy_others = heavy_total - counts
        own: FloatArray = np.zeros_like(counts) if null else np.where(light, plug, counts)
        return _corrected_variance(
            self.mechanism,
            self.n,
            self.lzl,
            self.weight,
            heavy_rows,
            heavy_others,
            own,
            self.own_mean,
            n - heavy_others - own,
            square - plug**2,
        )

    def standard_errors(self, *, null: bool = False) -> FloatArray:
        """sqrt(``variances``)."""
        return np.asarray(np.sqrt(np.maximum(self.variances(null=null), 0.0)), dtype=np.float64)


def device_choice(keys: KeyedSource, label: str, high: int) -> int:
    """A choice of the device, uniform in [0, high) and independent of its values, fixed per
    device and campaign by the keyed source (the same for every string it reports)."""
    return int(uniform_below(keys.source(label, 0), high, 1)[0]) if high > 1 else 0


class _MemoizedSketch(MemoizedStrings):
    """What memoized CMS and HCMS share: the PRR is the sketch at epsilon_permanent with the
    device's row (and column) fixed; the instantaneous step flips each sign of it again unless
    kept (probability p2), so one report is the same sketch with the composed flip probability
    q' = q1 p2 + (1 - q1)(1 - p2) (the estimators and the exact channel use q')."""

    m: int
    hashes: int
    seed: int
    namespace: ClassVar[str] = ""
    plain: ClassVar[type[StringSketch]]
    signs_differing: ClassVar[int]
    """How many signs of one report two inputs can change (cms: 2, hcms: 1)."""

    def _sketch_post_init(self) -> None:
        self._check_permanent()
        _ = self._keep_threshold  # refuse impossible configs now

    @cached_property
    def permanent(self) -> Any:
        return self.plain(self.epsilon_permanent, self.m, self.hashes, self.max_length, self.seed)

    @cached_property
    def _keep_threshold(self) -> int:
        target = Fraction(math.exp(self.epsilon))
        return flip_again_threshold(self.permanent.flip_probability, target, self.signs_differing)

    @property
    def keep_probability(self) -> Fraction:
        """p2: the probability that the instantaneous step keeps a permanent sign."""
        return threshold_probability(self._keep_threshold)

    @cached_property
    def flip_probability(self) -> Fraction:
        """The composed q' of one report (the estimators and the channel use it)."""
        return composed_flip(self.permanent.flip_probability, self.keep_probability)

    @property
    def epsilon_one(self) -> float:
        q = self.flip_probability
        return self.signs_differing * log_fraction((1 - q) / q)

    def _flip_again(self, rng: RandomSource | None, shape: int | tuple[int, ...]) -> Any:
        return bernoulli_lazy(rng, WORD_SPAN - self._keep_threshold, shape)


@dataclasses.dataclass(frozen=True)
class MemoizedCMS(_MemoizedSketch, CMS):
    """CMS under ``"longitudinal"`` (``_MemoizedSketch``). The device's row is fixed by its keyed
    source; the PRR's m bits are memoized per string; each report flips every bit again with
    probability 1 - p2. Two inputs differ in two signs: epsilon_1 = 2 ln((1 - q')/q')."""

    epsilon_permanent: float = dataclasses.field(kw_only=True)
    plain: ClassVar[type[StringSketch]] = CMS
    signs_differing: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        self._sketch_post_init()

    def permanent_reports(self, distinct: Sequence[bytes], keys: KeyedSource) -> Reports:
        row = device_choice(keys, f"{self.namespace}cms:row", self.hashes)
        return self.permanent_of_buckets(self.hash_table(distinct)[:, row], row, distinct, keys)

    def permanent_of_buckets(
        self,
        buckets: npt.NDArray[np.int64],
        row: int,
        distinct: Sequence[bytes],
        keys: KeyedSource,
    ) -> Reports:
        """PRRs of strings whose cell in the device's row is ``buckets``, each drawn from its
        string's stream (``memo_label``)."""
        plain = self.permanent
        out = np.zeros(len(distinct), dtype=self.report_dtype)
        out["row"] = row
        for i, raw in enumerate(distinct):
            stream = keys.source(memo_label(self.namespace, raw), 0)
            flips = bernoulli_lazy(stream, plain._flip_threshold, self.m)
            flips[buckets[i]] ^= True
            out["bits"][i] = np.packbits(flips)
        return out

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        out = np.array(permanent, copy=True)
        step = max(1, CHUNK_CELLS // self.m)
        for start in range(0, out.size, step):
            chunk = out["bits"][start : start + step]
            bits = np.unpackbits(chunk, axis=1, count=self.m).astype(bool)
            bits ^= self._flip_again(rng, bits.shape)
            out["bits"][start : start + step] = np.packbits(bits, axis=1)
        return out

    @property
    def resend_probability(self) -> float:
        """Every one of the m bits kept: p2^m."""
        return float(self.keep_probability) ** self.m

    @property
    def linkability(self) -> str:
        p2 = float(self.keep_probability)
        return (
            f"the row (one of {self.hashes}) is the device's for the campaign, the same in all "
            "its reports whatever the string; no component depends on the string "
            f"deterministically: each of the {self.m} bits equals its permanent bit with "
            f"probability p2 = {p2:.4g} (the whole report with p2^m = "
            f"{self.resend_probability:.3g})"
        )


@dataclasses.dataclass(frozen=True)
class MemoizedHCMS(_MemoizedSketch, HCMS):
    """HCMS under ``"longitudinal"`` (``_MemoizedSketch``). The device's row and column are
    fixed by its keyed source; the PRR's sign is memoized per string; each report flips it again
    with probability 1 - p2: epsilon_1 = ln((1 - q')/q')."""

    epsilon_permanent: float = dataclasses.field(kw_only=True)
    plain: ClassVar[type[StringSketch]] = HCMS
    signs_differing: ClassVar[int] = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        self._sketch_post_init()

    def cell(self, keys: KeyedSource) -> tuple[int, int]:
        """The device's (row, column)."""
        return (
            device_choice(keys, f"{self.namespace}hcms:row", self.hashes),
            device_choice(keys, f"{self.namespace}hcms:column", self.m),
        )

    def permanent_reports(self, distinct: Sequence[bytes], keys: KeyedSource) -> Reports:
        row, column = self.cell(keys)
        return self.permanent_of_buckets(
            self.hash_table(distinct)[:, row], (row, column), distinct, keys
        )

    def permanent_of_buckets(
        self,
        buckets: npt.NDArray[np.int64],
        cell: tuple[int, int],
        labels: Sequence[bytes],
        keys: KeyedSource,
    ) -> npt.NDArray[np.int64]:
        """PRRs of strings whose cell in the device's row is ``buckets``, at the device's
        ``cell``; the sign of string i drawn from the stream of ``labels[i]``."""
        row, column = cell
        plus = (np.bitwise_count(np.asarray(buckets, dtype=np.int64) & column) & 1) == 0
        flips = np.array(
            [
                bernoulli_lazy(
                    keys.source(memo_label(self.namespace, raw), 0),
                    self.permanent._flip_threshold,
                    1,
                )[0]
                for raw in labels
            ],
            dtype=bool,
        )
        return ((row * self.m + column) * 2 + (plus ^ flips)).astype(np.int64)

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        reports = np.asarray(permanent, dtype=np.int64)
        return reports ^ self._flip_again(rng, reports.size).astype(np.int64)

    @property
    def resend_probability(self) -> float:
        return float(self.keep_probability)

    @property
    def linkability(self) -> str:
        return (
            f"the row and column (one of {self.hashes * self.m} cells) are the device's for the "
            "campaign, the same in all its reports whatever the string; the sign equals the "
            f"permanent sign with probability p2 = {float(self.keep_probability):.4g}: no "
            "component depends on the string deterministically"
        )


def _walsh_hadamard(rows: FloatArray) -> FloatArray:
    """rows @ H_m for the Sylvester Hadamard matrix H_m (m a power of two), per row, in
    O(m log m): entry r of the result is sum_l rows[l] (-1)^popcount(r & l)."""
    out = np.array(rows, dtype=np.float64, copy=True)
    count, m = out.shape
    half = 1
    while half < m:
        view = out.reshape(count, m // (2 * half), 2, half)
        a = view[:, :, 0, :].copy()
        b = view[:, :, 1, :]
        view[:, :, 0, :] = a + b
        view[:, :, 1, :] = a - b
        half *= 2
    return out
