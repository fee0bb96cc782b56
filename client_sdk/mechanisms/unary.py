"""Unary encoding: symmetric (SUE, basic one-time RAPPOR) and optimized (OUE).

Erlingsson, Pihur, Korolova, CCS 2014 (RAPPOR); Wang, Blocki, Li, Jha, USENIX Security 2017
(docs/math/unary-encoding.md). The value v is one-hot encoded into k bits and every bit is
flipped independently: a 1 stays 1 with probability p, a 0 becomes 1 with probability q.
SUE: p = e^(eps/2)/(e^(eps/2)+1), q = 1-p. OUE: p = 1/2, q = 1/(e^eps+1).

Reports are packed bit rows (``numpy.packbits(bits, axis=1)``: uint8, shape ``(n, ceil(k/8))``,
big-endian bit order within a byte, pad bits zero); the wire form is the unpadded URL-safe base64
of a row. Report v supports item i when bit i is set, so p* = p and q* = q.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int, check_values
from client_sdk.mechanisms._wire import bits_text, decode_bits, encode_bit_rows
from client_sdk.mechanisms.base import FloatArray, FrequencyOracle, Reports, WireFormatError
from client_sdk.mechanisms.memoization import MAX_THRESHOLD, Chain
from client_sdk.mechanisms.privacy import UnaryEncodingEvent
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli_bytes,
    bernoulli_lazy,
    probability_threshold,
    random_bits,
    threshold_probability,
)

MAX_BIT_VECTOR_K = 1 << 20
"""Largest k for mechanisms whose report is a k-bit vector (128 KiB per report)."""

MAX_ENUMERATED_K = 10
"""Largest k whose 2**k outputs ``channel_matrices`` enumerates."""

CHUNK_BITS = 1 << 23
"""Bits handled per chunk when perturbing or counting (an 8 MiB bool array at most)."""

# _BIT_TABLE[b, j] is bit j (most significant first, as numpy.packbits) of the byte b.
_BIT_TABLE = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.int64)


def check_bit_vector_k(k: Any) -> int:
    """k for a k-bit report: an integer in [2, MAX_BIT_VECTOR_K]."""
    return check_int(k, "k", minimum=2, maximum=MAX_BIT_VECTOR_K)


def rows_per_chunk(bits_per_row: int) -> int:
    """How many rows of ``bits_per_row`` bits make one chunk of about CHUNK_BITS bits."""
    return max(1, CHUNK_BITS // max(1, bits_per_row))


def column_counts(packed: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.int64]:
    """How many rows of a packed bit matrix have bit i set, for i in [0, k).

    No O(n*k) array is built: per chunk of rows, a histogram of the byte values in each byte
    column (one ``bincount`` over ``STRIDE * column + byte``) is multiplied by the table of the
    eight bits of every byte value. Cost O(n * k/8) integer work, memory O(k + chunk). The
    columns' counters are 257 (not 256) apart: with a power-of-two stride, sparse reports (almost
    all bytes zero) make consecutive increments hit addresses a multiple of 4 KiB apart, which
    the CPU treats as dependent (4K aliasing) and bincount runs about four times slower.
    """
    rows = np.asarray(packed, dtype=np.uint8)
    nbytes = (k + 7) // 8
    if rows.ndim != 2 or rows.shape[1] != nbytes:
        raise ValueError(f"reports must have shape (n, {nbytes}) for k={k}; got {rows.shape}")
    stride = 257
    histogram = np.zeros(nbytes * stride, dtype=np.int64)
    offsets = np.arange(nbytes, dtype=np.intp) * stride
    step = rows_per_chunk(8 * nbytes)
    for start in range(0, rows.shape[0], step):
        chunk = rows[start : start + step]
        histogram += np.bincount((chunk + offsets).ravel(), minlength=nbytes * stride)
    per_value = histogram.reshape(nbytes, stride)[:, :256].T  # (256, nbytes): rows = byte values
    return (_BIT_TABLE.T @ per_value).T.reshape(-1)[:k]


_LANES = np.uint64(0x0101010101010101)


def transposed_column_counts(columns: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.int64]:
    """:func:`column_counts` of packed rows given transposed: ``columns[c, r]`` is byte c of row
    r, shape (ceil(k/8), w) with w a multiple of 8 (pad rows all zero). Bit i of byte c (most
    significant first) is item 8c + i: its count is the popcount of every word of byte column c
    masked to bit i of each of its eight bytes (eight masked popcount passes over the bytes,
    no per-byte histogram)."""
    nbytes = (k + 7) // 8
    if columns.ndim != 2 or columns.shape[0] != nbytes or columns.shape[1] % 8:
        raise ValueError(
            f"columns must have shape ({nbytes}, a multiple of 8) for k={k}; got {columns.shape}"
        )
    words = np.ascontiguousarray(columns).view(np.uint64)
    counts = np.empty((nbytes, 8), dtype=np.int64)
    masked = np.empty_like(words)
    for bit in range(8):
        np.bitwise_and(words, _LANES * np.uint64(0x80 >> bit), out=masked)
        counts[:, bit] = np.bitwise_count(masked).sum(axis=1, dtype=np.int64)
    return counts.reshape(-1)[:k]


def packed_bits_to_index(packed: npt.NDArray[np.uint8], k: int) -> npt.NDArray[np.int64]:
    """The integer sum_i bit_i * 2**i of each packed row of k bits (k <= 62)."""
    if k > 62:
        raise ValueError(f"k={k} bits do not fit in an int64 index")
    bits = np.unpackbits(np.asarray(packed, dtype=np.uint8), axis=1, count=k).astype(np.int64)
    return bits @ (np.int64(1) << np.arange(k, dtype=np.int64))


class UnaryEncoding(FrequencyOracle):
    """Shared device and server side of SUE and OUE (subclasses give the ideal p and q)."""

    epsilon: float
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_bit_vector_k(self.k))

    @abc.abstractmethod
    def _ideal_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p, q) of the paper, before rounding to the sampler's grid."""

    # Rounding: the per-pair worst ratio of the implemented channel is p(1-q)/(q(1-p)) (two
    # inputs differ in two bits; the worst output sets the first and clears the second). It
    # increases with p and decreases with q, so p is rounded *down* and q *up* to the 2**-64
    # grid of the sampler: the implemented ratio never exceeds e^eps, and falls short of it by
    # a relative 2**-64/q at most, so the claim stays tight.
    @cached_property
    def _thresholds(self) -> tuple[int, int]:
        p, q = self._ideal_probabilities()
        return (
            probability_threshold(p, rounding="down"),
            probability_threshold(q, rounding="up"),
        )

    @cached_property
    def _implemented(self) -> tuple[Fraction, Fraction]:
        p_threshold, q_threshold = self._thresholds
        return threshold_probability(p_threshold), threshold_probability(q_threshold)

    @property
    def p_star(self) -> float:
        return float(self._implemented[0])

    @property
    def q_star(self) -> float:
        return float(self._implemented[1])

    def privacy_event(self) -> UnaryEncodingEvent:
        """Unary encoding with the implemented bit probabilities p*, q*."""
        return UnaryEncodingEvent(self.p_star, self.q_star)

    @property
    def report_bytes(self) -> int:
        """Bytes per packed report: ceil(k/8)."""
        return (self.k + 7) // 8

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """Packed bit rows, chunk by chunk: every bit Bernoulli(q), then bit x Bernoulli(p)."""
        x = check_values(values, self.k)
        p_threshold, q_threshold = self._thresholds
        out = np.empty((x.size, self.report_bytes), dtype=np.uint8)
        step = rows_per_chunk(self.k)
        for start in range(0, x.size, step):
            rows = x[start : start + step]
            bits = bernoulli_lazy(rng, q_threshold, (rows.size, self.k))
            bits[np.arange(rows.size), rows] = bernoulli_lazy(rng, p_threshold, rows.size)
            out[start : start + rows.size] = np.packbits(bits, axis=1)
        return out

    def perturb_compact(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """The reports of :meth:`perturb` (the same distribution), from about 2 random bits per
        bit instead of 8: the bytes of every row by :func:`bernoulli_bytes` at q, the pad bits
        cleared, then bit x replaced by an independent Bernoulli(p) (the bits are independent,
        so this leaves the others as they were); when p is exactly 1/2 (OUE), bit x is one fair
        random bit. ``perturb`` keeps its own random stream, which memoized (permanent) reports
        recomputed from a keyed source must reproduce."""
        x = check_values(values, self.k)
        step = rows_per_chunk(self.report_bytes)  # blocks of at most CHUNK_BITS bytes
        if x.size <= step:
            return self._compact_block(x, rng)
        out = np.empty((x.size, self.report_bytes), dtype=np.uint8)
        for start in range(0, x.size, step):
            rows = x[start : start + step]
            out[start : start + rows.size] = self._compact_block(rows, rng)
        return out

    def _compact_block(self, rows: npt.NDArray[np.int64], rng: RandomSource | None) -> Reports:
        p_threshold, q_threshold = self._thresholds
        block = bernoulli_bytes(rng, q_threshold, (rows.size, self.report_bytes))
        if self.k % 8:
            block[:, -1] &= np.uint8((0xFF << (8 * self.report_bytes - self.k)) & 0xFF)
        mask = np.right_shift(np.uint8(0x80), (rows & 7).astype(np.uint8))
        if p_threshold == WORD_SPAN // 2:  # P[1] = 1/2 exactly: one uniform bit
            kept = random_bits(rng, rows.size).view(np.uint8) * mask
        else:
            kept = bernoulli_lazy(rng, p_threshold, rows.size).view(np.uint8) * mask
        flat = block.reshape(-1)
        where = np.arange(rows.size) * self.report_bytes + (rows >> 3)
        flat[where] = (flat[where] & ~mask) | kept
        return block

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return bits_text(self.k)

    def to_wire(self, reports: Reports) -> list[Any]:
        return list(encode_bit_rows(reports, self.k))

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return decode_bits(payloads, self.k)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return column_counts(reports, self.k)

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[y | x] over all 2**k outputs y, column y = the report with bits y (bit i = item i)."""
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        p, q = (float(v) for v in self._implemented)
        outputs = np.arange(1 << self.k)
        bits = (outputs[:, None] >> np.arange(self.k)) & 1  # (2**k, k)
        one = np.where(np.eye(self.k, dtype=bool), p, q)  # one[x, i] = P[bit i = 1 | x]
        per_bit = np.where(bits[None, :, :] == 1, one[:, None, :], 1 - one[:, None, :])
        yield per_bit.prod(axis=2)

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in: sum_i bit_i * 2**i."""
        if self.k > MAX_ENUMERATED_K:
            raise ValueError(f"k={self.k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        return packed_bits_to_index(reports, self.k)

    def memoization_chain(self, target: Fraction) -> Chain:
        """L-UE: the unary-encoded report memoized, then every bit kept or flipped."""
        return BitFlipChain(self, target)


class BitFlipChain(Chain):
    """L-UE: the unary-encoded permanent report, then every bit kept with probability p2, else
    flipped.

    RAPPOR's per-bit permanent then instantaneous response (Erlingsson, Pihur, Korolova, CCS
    2014); with OUE's permanent step this is L-OSUE (Arcolezi et al. 2022). Per bit
    P = p1 p2 + (1-p1)(1-p2) and Q = q1 p2 + (1-q1)(1-p2), and since two inputs differ in two
    bits, epsilon_1 = ln[P(1-Q)/(Q(1-P))]: the composed report is unary encoding with p* = P,
    q* = Q (docs/math/memoization.md).
    """

    kind = "l-ue"

    def __init__(self, inner: UnaryEncoding, target: Fraction) -> None:
        self.permanent = inner._implemented
        super().__init__(inner, target)

    def threshold_range(self) -> tuple[int, int]:
        return WORD_SPAN // 2, MAX_THRESHOLD

    def _bits(self, keep: Fraction) -> tuple[Fraction, Fraction]:
        p1, q1 = self.permanent
        return p1 * keep + (1 - p1) * (1 - keep), q1 * keep + (1 - q1) * (1 - keep)

    def ratio(self, threshold: int) -> Fraction:
        big, small = self._bits(threshold_probability(threshold))
        return big * (1 - small) / (small * (1 - big))

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        rows = np.asarray(permanent, dtype=np.uint8)
        k = self.inner.k
        flip_threshold = WORD_SPAN - self.threshold  # P[flip] = 1 - p2 exactly
        out = np.empty_like(rows)
        step = rows_per_chunk(k)
        for start in range(0, rows.shape[0], step):
            chunk = rows[start : start + step]
            bits = np.unpackbits(chunk, axis=1, count=k).astype(bool)
            bits ^= bernoulli_lazy(rng, flip_threshold, bits.shape)
            out[start : start + chunk.shape[0]] = np.packbits(bits, axis=1)
        return out

    @property
    def resend_probability(self) -> Fraction:
        """Every one of the k bits kept: p2^k."""
        return self.parameter**self.inner.k

    def linkability(self) -> str:
        p2 = float(self.parameter)
        return (
            "no deterministic component; reports of one value are i.i.d. given the permanent "
            f"bits, each bit equal to its permanent bit with probability p2 = {p2:.4g} (the "
            f"whole report with p2^k = {float(self.resend_probability):.4g})"
        )

    def support(self) -> tuple[Fraction, Fraction]:
        return self._bits(self.parameter)

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        k = self.inner.k
        if k > MAX_ENUMERATED_K:
            raise ValueError(f"k={k} is too large to enumerate (limit {MAX_ENUMERATED_K})")
        outputs = np.arange(1 << k)
        differing = np.zeros((outputs.size, outputs.size), dtype=np.int64)
        xor = outputs[:, None] ^ outputs[None, :]
        for bit in range(k):
            differing += (xor >> bit) & 1
        keep = float(self.parameter)
        transition = keep ** (k - differing) * (1 - keep) ** differing
        return np.asarray(permanent_channel @ transition, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class SUE(UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR): each bit is randomized with eps/2."""

    name: ClassVar[str] = "sue"
    epsilon: float
    k: int

    def _ideal_probabilities(self) -> tuple[Fraction, Fraction]:
        # The worst ratio is (p/q)^2 = half^2. Every mechanism measures itself against the float
        # e^eps (exactly, as a rational); take half = e^(eps/2) as the largest float whose square
        # does not exceed it, so that rounding p down and q up keeps the ratio within the claim.
        bound = Fraction(math.exp(self.epsilon))
        root = math.sqrt(float(bound))
        if Fraction(root) ** 2 > bound:
            root = math.nextafter(root, 0.0)
        half = Fraction(root)
        return half / (half + 1), 1 / (half + 1)


@dataclasses.dataclass(frozen=True)
class OUE(UnaryEncoding):
    """Optimized unary encoding: keep the 1 with probability 1/2, set a 0 with 1/(e^eps+1)."""

    name: ClassVar[str] = "oue"
    epsilon: float
    k: int

    def _ideal_probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(1, 2), 1 / (Fraction(math.exp(self.epsilon)) + 1)
