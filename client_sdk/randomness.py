"""The one place that owns randomness for the SDK.

Every randomized function in this project takes ``rng=`` keyword-only. ``None`` means the
operating system's CSPRNG (``os.urandom``: getrandom(2) on Linux), which is the default on
devices. Tests and simulations pass ``numpy.random.default_rng(seed)``.

Both sources are reduced to one primitive, a vector of uniform 64-bit words (``raw_words``), and
every sampler below is built on that primitive with *integer* arithmetic. Seeded runs therefore
exercise exactly the code path that devices run, and every probability a mechanism implements is a
rational number with denominator 2**64 that the privacy checks can reason about exactly
(docs/architecture.md, "Randomness": compare integers, not floats).

Why not NumPy's generators on devices: PCG64 and MT19937 are not cryptographically secure; an
observer of enough outputs can recover the state and re-derive the noise (docs/architecture.md).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import hmac
import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Union

import numpy as np
import numpy.typing as npt

__all__ = [
    "SYSTEM_RANDOM",
    "HmacWordSource",
    "RandomSource",
    "SystemRandomSource",
    "bernoulli",
    "bernoulli_bytes",
    "bernoulli_lazy",
    "probability_threshold",
    "random_bits",
    "raw_words",
    "resolve_rng",
    "sample_subsets",
    "threshold_probability",
    "uniform_below",
    "uniform_below_32",
    "uniform_below_bits",
]

WORD_BITS = 64
WORD_SPAN = 1 << WORD_BITS
_MAX_URANDOM_BYTES = 1 << 24  # os.urandom is called in chunks of at most 16 MiB


class SystemRandomSource:
    """Uniform 64-bit words from the operating system's CSPRNG (``os.urandom``).

    Stateless and thread-safe: every call asks the kernel for fresh bytes.
    """

    __slots__ = ()

    def words(self, size: int) -> npt.NDArray[np.uint64]:
        """Return ``size`` independent uniform uint64 words."""
        nbytes = 8 * int(size)
        if nbytes <= _MAX_URANDOM_BYTES:
            return np.frombuffer(os.urandom(nbytes), dtype="<u8").astype(np.uint64, copy=True)
        out = np.empty(int(size), dtype=np.uint64)
        step = _MAX_URANDOM_BYTES // 8
        for start in range(0, int(size), step):
            stop = min(int(size), start + step)
            out[start:stop] = np.frombuffer(os.urandom(8 * (stop - start)), dtype="<u8")
        return out

    def __repr__(self) -> str:
        return "SystemRandomSource()"


SYSTEM_RANDOM = SystemRandomSource()


class HmacWordSource:
    """Deterministic uniform 64-bit words: HMAC-SHA256 in counter mode under a secret key.

    For *memoized* randomness (the permanent randomized response of RAPPOR and of every
    longitudinal mechanism, docs/math/memoization.md): the same key always yields the same words,
    so a device recomputes its permanent response instead of storing it, while anyone without the
    key sees words indistinguishable from uniform (HMAC-SHA256 is a PRF). Block i (from 0) is
    HMAC-SHA256(key, i as 8 bytes big-endian): four little-endian words. Words are consumed in
    order across calls (the source is stateful and not thread-safe; build one per derivation).
    The key must hold at least 16 bytes (it is normally itself an HMAC output, 32 bytes).
    """

    __slots__ = ("_block", "_buffer", "_mac")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
            raise ValueError("HmacWordSource needs a key of at least 16 bytes")
        self._mac = hmac.new(bytes(key), digestmod=hashlib.sha256)
        self._block = 0
        self._buffer = np.zeros(0, dtype=np.uint64)

    def words(self, size: int) -> npt.NDArray[np.uint64]:
        """The next ``size`` words of the stream."""
        size = int(size)
        missing = size - self._buffer.size
        if missing > 0:
            blocks = -(-missing // 4)
            chunks = []
            for index in range(self._block, self._block + blocks):
                mac = self._mac.copy()
                mac.update(index.to_bytes(8, "big"))
                chunks.append(mac.digest())
            self._block += blocks
            fresh = np.frombuffer(b"".join(chunks), dtype="<u8").astype(np.uint64)
            self._buffer = np.concatenate([self._buffer, fresh])
        out, self._buffer = self._buffer[:size].copy(), self._buffer[size:]
        return out

    def __repr__(self) -> str:
        return "HmacWordSource(<secret key>)"


RandomSource = Union[np.random.Generator, SystemRandomSource, HmacWordSource]  # noqa: UP007


def resolve_rng(rng: RandomSource | None) -> RandomSource:
    """Return the source to use: the CSPRNG for ``None``, else ``rng`` after a type check."""
    if rng is None:
        return SYSTEM_RANDOM
    if isinstance(rng, (np.random.Generator, SystemRandomSource, HmacWordSource)):
        return rng
    raise TypeError(
        "rng must be None (the OS CSPRNG), a numpy.random.Generator, a SystemRandomSource or an "
        f"HmacWordSource; got {type(rng).__name__}"
    )


def raw_words(rng: RandomSource | None, size: int) -> npt.NDArray[np.uint64]:
    """Uniform 64-bit words from ``rng`` (the common primitive of every sampler)."""
    source = resolve_rng(rng)
    if isinstance(source, (SystemRandomSource, HmacWordSource)):
        return source.words(size)
    return np.asarray(source.bit_generator.random_raw(int(size)), dtype=np.uint64)


def uniform_below(
    rng: RandomSource | None, high: int | npt.NDArray[np.integer], size: int
) -> npt.NDArray[np.int64]:
    """Exactly uniform integers in ``[0, high)`` by rejection (no modulo bias).

    ``high`` is a positive integer below 2**63, or an array of them of length ``size`` (a
    different range per draw). A word ``w`` is accepted when ``w < 2**64 - (2**64 mod high)``,
    which leaves a whole number of copies of ``[0, high)``; the rejection rate is below
    ``high / 2**64``, so the loop almost never repeats.
    """
    out = np.empty(int(size), dtype=np.int64)
    if np.ndim(high) == 0:
        h = int(high)
        if not 1 <= h < (1 << 63):
            raise ValueError(f"high must be in [1, 2**63); got {high!r}")
        # Accept words below the largest multiple of h that fits in 64 bits.
        word_limit = WORD_SPAN - (WORD_SPAN % h)
        pending = np.arange(int(size))
        while pending.size:
            words = raw_words(rng, pending.size)
            accept = (
                words < np.uint64(word_limit)
                if word_limit < WORD_SPAN
                else np.ones(words.size, dtype=bool)
            )
            out[pending[accept]] = (words[accept] % np.uint64(h)).astype(np.int64)
            pending = pending[~accept]
        return out
    highs = np.asarray(high, dtype=np.int64)
    if highs.shape != (int(size),):
        raise ValueError(f"high must be a scalar or have shape ({size},); got {highs.shape}")
    if highs.size and (highs.min() < 1):
        raise ValueError(f"every high must be in [1, 2**63); got minimum {highs.min()}")
    uhighs = highs.astype(np.uint64)
    pending = np.arange(int(size))
    while pending.size:
        words = raw_words(rng, pending.size)
        span = uhighs[pending]
        # 2**64 mod span, computed without overflow as (2**64 - span) mod span (arrays wrap).
        remainder = (np.zeros_like(span) - span) % span
        limit = np.zeros_like(span) - remainder  # 2**64 - remainder; wraps to 0 when that is 0
        accept = (remainder == 0) | (words < limit)
        out[pending[accept]] = (words[accept] % span[accept]).astype(np.int64)
        pending = pending[~accept]
    return out


def uniform_below_32(
    rng: RandomSource | None, high: int | npt.ArrayLike, size: int | tuple[int, ...]
) -> npt.NDArray[np.int64]:
    """Exactly uniform integers in ``[0, high)`` for ``1 <= high <= 2**32``, from few bits.

    ``high`` is an integer or an array that broadcasts against ``size`` (a different range per
    row, say). Lemire's multiply-shift (ACM TOMACS 2019) on L-bit lanes of the random words: a
    uniform L-bit ``u`` gives ``(u * high) >> L``, rejected (and drawn again) when the low L bits
    of ``u * high`` are below ``2**L mod high``; what is accepted is exactly uniform. L = 16 (four
    draws per word) when every high is at most 2**12, so that fewer than 1/16 of the draws are
    rejected; otherwise L = 32. The same distribution as :func:`uniform_below` from a quarter or
    half of the random words and no division: samplers that draw many small integers (Floyd's
    algorithm in subset selection) use it.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    highs = np.asarray(high)
    if highs.dtype == np.bool_ or not np.issubdtype(highs.dtype, np.integer):
        raise ValueError(f"high must be integers in [1, 2**32]; got dtype {highs.dtype}")
    if highs.size and (highs.min() < 1 or highs.max() > (1 << 32)):
        raise ValueError(f"high must be in [1, 2**32]; got range [{highs.min()}, {highs.max()}]")
    if np.broadcast_shapes(highs.shape, shape) != shape:
        raise ValueError(f"high of shape {highs.shape} does not broadcast to size {shape}")
    lane_bits = 16 if highs.size and highs.max() <= (1 << 12) else 32
    if highs.ndim == 0 and lane_bits == 16:
        return _uniform_below_16(rng, int(highs), shape)
    lane, wide = (np.uint16, np.uint32) if lane_bits == 16 else (np.uint32, np.uint64)
    wide_highs = highs.astype(wide)
    reject_below = ((1 << lane_bits) % highs.astype(np.uint64)).astype(wide)
    count = int(np.prod(shape, dtype=np.int64))
    per_word = WORD_BITS // lane_bits
    lanes = raw_words(rng, -(-count // per_word)).view(lane)[:count].reshape(shape)
    product = lanes.astype(wide) * wide_highs
    out = (product >> wide(lane_bits)).astype(np.int64)
    if np.any(reject_below):
        rejected = (product & wide((1 << lane_bits) - 1)) < reject_below
        if rejected.any():  # a draw is rejected with probability below high / 2**L
            where = np.unravel_index(np.flatnonzero(rejected), shape)
            redo_high = np.broadcast_to(highs, shape)[where]
            out[where] = uniform_below_32(rng, redo_high, redo_high.size)
    return out


def uniform_below_bits(rng: RandomSource | None, high: int, size: int) -> npt.NDArray[np.int64]:
    """Exactly uniform integers in ``[0, high)`` for ``2 <= high <= 2**32``: the top
    L = bit_length(high - 1) bits of a 32-bit lane, drawn again while at least ``high`` (a lane
    is rejected with probability 1 - high / 2**L < 1/2). No multiplication or division: for a
    high just below a power of two (the hash family's P - 1 and P = 2**31 - 1, rejected about
    once in 2**30 draws) the cheapest exact draw from 32 random bits."""
    h = int(high)
    if not 2 <= h <= (1 << 32):
        raise ValueError(f"high must be in [2, 2**32]; got {high!r}")
    shift = np.uint32(32 - (h - 1).bit_length())
    out = np.empty(int(size), dtype=np.int64)
    pending: npt.NDArray[np.intp] | None = None
    while True:
        count = out.size if pending is None else pending.size
        lanes = raw_words(rng, -(-count // 2)).view(np.uint32)[:count] >> shift
        if pending is None:
            out[:] = lanes
            rejected = np.flatnonzero(out >= h)
        else:
            out[pending] = lanes
            rejected = pending[lanes >= h]
        if not rejected.size:
            return out
        pending = rejected


def _uniform_below_16(
    rng: RandomSource | None, high: int, shape: tuple[int, ...]
) -> npt.NDArray[np.int64]:
    """:func:`uniform_below_32` for one ``high`` <= 2**12 on 16-bit lanes, the same algorithm
    in fewer passes: one uint32 product, its high half written straight into the int64 output,
    its low half (the little-endian first uint16 of each product) compared with 2**16 mod
    high."""
    count = int(np.prod(shape, dtype=np.int64))
    lanes = raw_words(rng, -(-count // 4)).view(np.uint16)[:count]
    product = np.multiply(lanes, np.uint32(high), dtype=np.uint32)
    out = np.empty(count, dtype=np.int64)
    np.right_shift(product, np.uint32(16), out=out, casting="unsafe")
    reject_below = (1 << 16) % high
    if reject_below:
        low = product.view(np.uint16)[0::2] if _LITTLE else (product & np.uint32(0xFFFF))
        rejected = np.flatnonzero(low < reject_below)
        if rejected.size:  # a draw is rejected with probability below high / 2**16
            out[rejected] = _uniform_below_16(rng, high, (rejected.size,))
    return out.reshape(shape)


_LITTLE = np.little_endian


def probability_threshold(probability: float | Fraction, *, rounding: str = "nearest") -> int:
    """The integer threshold ``T`` such that ``word < T`` has probability ``T / 2**64``.

    ``rounding`` is ``"down"``, ``"up"`` or ``"nearest"``; mechanisms pick the direction that
    keeps the implemented channel within its privacy claim. The threshold is clamped to
    ``[0, 2**64 - 1]`` so it fits in a uint64.
    """
    exact = Fraction(probability)
    if not 0 <= exact <= 1:
        raise ValueError(f"probability must be in [0, 1]; got {probability!r}")
    scaled = exact * WORD_SPAN
    if rounding == "down":
        threshold = scaled.numerator // scaled.denominator
    elif rounding == "up":
        threshold = -((-scaled.numerator) // scaled.denominator)
    elif rounding == "nearest":
        threshold = round(scaled)
    else:
        raise ValueError(f"rounding must be 'down', 'up' or 'nearest'; got {rounding!r}")
    return int(min(max(threshold, 0), WORD_SPAN - 1))


def threshold_probability(threshold: int) -> Fraction:
    """The exact probability ``T / 2**64`` that a threshold implements."""
    return Fraction(int(threshold), WORD_SPAN)


def bernoulli(
    rng: RandomSource | None, threshold: int, size: int | tuple[int, ...]
) -> npt.NDArray[np.bool_]:
    """Independent Bernoulli(``threshold / 2**64``) draws, exactly.

    Use :func:`probability_threshold` to turn a probability into a threshold once, when the
    mechanism is built, so the implemented probability is fixed and known.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    words = raw_words(rng, count)
    return (words < np.uint64(threshold)).reshape(shape)


def bernoulli_lazy(
    rng: RandomSource | None, threshold: int, size: int | tuple[int, ...]
) -> npt.NDArray[np.bool_]:
    """Independent Bernoulli(``threshold / 2**64``) draws, exactly, from about 8 random bits each.

    The same distribution as :func:`bernoulli` (so the implemented probability is unchanged),
    for an eighth of the randomness: a draw compares one uniform byte ``b`` with the top byte
    ``h`` of the threshold and is decided when ``b != h``; only on a tie (probability 1/256) does
    it compare 56 fresh uniform bits with the threshold's low 56 bits ``l``. Hence
    P[1] = h/256 + (1/256)(l/2**56) = threshold/2**64. Bit-vector mechanisms (unary encoding)
    draw one Bernoulli per output bit, so this is what makes them fast with the CSPRNG.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    threshold = int(threshold)
    if not 0 <= threshold < WORD_SPAN:
        raise ValueError(f"threshold must be in [0, 2**64); got {threshold!r}")
    high, low = threshold >> 56, threshold & ((1 << 56) - 1)
    first = raw_words(rng, (count + 7) // 8).view(np.uint8)[:count]
    out = first < np.uint8(high)
    if low:
        ties = np.flatnonzero(first == np.uint8(high))
        if ties.size:
            out[ties] = (raw_words(rng, ties.size) >> np.uint64(8)) < np.uint64(low)
    return out.reshape(shape)


BYTE_LANE_BITS = 16
_HEADS_DECIDING = 192
""":func:`bernoulli_bytes` draws an 8-bit head first only when at least this many of the 256
heads decide their byte alone (75% of draws): measured on 10**7 bytes, the head saved 15-25%
of the CPU where it decides 80-96% (q = 0.12, 0.02) and cost 25% more where it decides half
(q = 0.27: the second stage's gather and scatter outweigh the 4 bits it saves)."""
_LOOKUP_BLOCK = 1 << 16
"""Lanes looked up per ``take`` in :func:`bernoulli_bytes`: numpy copies the uint16 indexes to
intp first, and a block's copy (512 KiB) stays in the cache."""
"""The first uniform lane that :func:`bernoulli_bytes` draws per output byte."""
_REFINE_SHIFT = 512 - BYTE_LANE_BITS - WORD_BITS  # a lane and one word: the top 80 of 512 bits


@dataclasses.dataclass(frozen=True)
class ByteTables:
    """The lookup tables of :func:`bernoulli_bytes` for one threshold T (q = T / 2**64).

    The 256 byte values b (bits most significant first, as ``numpy.packbits``) have the exact
    probabilities P(b) = q^w (1-q)^(8-w), w the number of set bits, i.e. integers
    ``cumulative[b+1] - cumulative[b]`` over 2**512. ``lane[u]`` is the byte whose cell holds the
    whole interval [u, u+1) / 2**16, or 256 where a cell boundary falls inside it; for those
    lanes, the boundaries inside, as the top 64 bits below the lane (``bounds``, segment
    ``start[u]:start[u] + count[u]``), and the cell the interval starts in (``first[u]``).
    """

    cumulative: tuple[int, ...]
    lane: npt.NDArray[np.uint16]
    first: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    count: npt.NDArray[np.int64]
    bounds: npt.NDArray[np.uint64]
    head: npt.NDArray[np.uint16]
    """``head[h]``: the byte whose cell holds the whole interval [h, h+1) / 2**8 (every lane
    ``lane[256 h : 256 h + 256]`` that byte), else 256: the first 8 bits decide it alone."""


@functools.lru_cache(maxsize=64)
def byte_tables(threshold: int) -> ByteTables:
    """The exact tables of :func:`bernoulli_bytes` for ``threshold`` (built once, cached)."""
    threshold = int(threshold)
    if not 0 <= threshold < WORD_SPAN:
        raise ValueError(f"threshold must be in [0, 2**64); got {threshold!r}")
    one, zero = threshold, WORD_SPAN - threshold
    cumulative = [0]
    for b in range(256):
        w = b.bit_count()
        cumulative.append(cumulative[-1] + one**w * zero ** (8 - w))
    assert cumulative[-1] == 1 << 512
    lanes = 1 << BYTE_LANE_BITS
    unit = 1 << (512 - BYTE_LANE_BITS)
    lane = np.full(lanes, 256, dtype=np.uint16)
    for b in range(256):
        low = -(-cumulative[b] // unit)  # ceil: the first lane starting inside the cell
        high = cumulative[b + 1] // unit  # the lanes ending by the cell's end
        if high > low:
            lane[low:high] = b
    first = np.zeros(lanes, dtype=np.int64)
    start = np.zeros(lanes, dtype=np.int64)
    count = np.zeros(lanes, dtype=np.int64)
    bounds: list[int] = []
    for u in np.flatnonzero(lane == 256).tolist():
        begin, end = u * unit, (u + 1) * unit
        first[u] = bisect.bisect_right(cumulative, begin) - 1
        inside = [c for c in cumulative[first[u] + 1 :] if c < end]
        start[u], count[u] = len(bounds), len(inside)
        bounds.extend((c >> _REFINE_SHIFT) - (u << WORD_BITS) for c in inside)
    rows = lane.reshape(256, 256)
    whole = np.all(rows == rows[:, :1], axis=1) & (rows[:, 0] != 256)
    head = np.where(whole, rows[:, 0], 256).astype(np.uint16)
    return ByteTables(
        tuple(cumulative),
        lane,
        first,
        start,
        count,
        np.array([*bounds, 0], dtype=np.uint64),
        head,
    )


def _refine_bytes(
    tables: ByteTables,
    lanes: npt.NDArray[np.int64],
    words: npt.NDArray[np.uint64],
    more: Callable[[int], npt.NDArray[np.uint64]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The byte of each straddling lane refined by one 64-bit word, by comparing the word with
    each of the lane's boundaries (all the draws' boundaries side by side, one pass: a lane
    holds few, and a search's rounds cost more in calls): below every boundary the interval
    starts in ``first``, and each boundary below the word moves it one cell on. A word equal to
    a boundary's top 64 bits is undecided (probability count / 2**64): those draws go on with
    ``more`` words in exact integer arithmetic (:func:`_exact_byte`)."""
    counts = tables.count[lanes]
    draw = np.repeat(np.arange(lanes.size), counts)  # the draw of each (draw, boundary) pair
    ends = np.cumsum(counts)
    position = np.arange(draw.size) - (ends - counts)[draw] + tables.start[lanes][draw]
    bounds, word = tables.bounds[position], words[draw]
    out = tables.first[lanes] + np.bincount(draw[bounds < word], minlength=lanes.size)
    tied = np.zeros(lanes.size, dtype=bool)
    tied[draw[bounds == word]] = True
    for index in np.flatnonzero(tied).tolist():
        prefix = (int(lanes[index]) << WORD_BITS) | int(words[index])
        out[index] = _exact_byte(tables.cumulative, prefix, BYTE_LANE_BITS + WORD_BITS, more)
    return out, tied


def _exact_byte(
    cumulative: tuple[int, ...],
    prefix: int,
    bits: int,
    more: Callable[[int], npt.NDArray[np.uint64]],
) -> int:
    """The cell of the uniform number whose first ``bits`` bits are ``prefix``, drawing further
    words until the interval [prefix, prefix + 1) / 2**bits lies in one cell (at most 512 bits:
    the cells' ends are multiples of 2**-512)."""
    while True:
        scale = 512 - bits
        begin = prefix << scale if scale >= 0 else prefix >> -scale
        cell = bisect.bisect_right(cumulative, begin) - 1
        if scale >= 0 and ((prefix + 1) << scale) <= cumulative[cell + 1]:
            return cell
        if scale < 0:  # beyond 512 bits every interval lies in one cell
            return cell
        prefix = (prefix << WORD_BITS) | int(more(1)[0])
        bits += WORD_BITS


def bernoulli_bytes(
    rng: RandomSource | None, threshold: int, size: int | tuple[int, ...]
) -> npt.NDArray[np.uint8]:
    """Bytes of 8 independent Bernoulli(``threshold / 2**64``) bits each, exactly, from 8 to
    16 random bits per byte (about 10 at q = 0.12, 12 at q = 0.27, 8.5 at q = 0.02).

    The same distribution as ``numpy.packbits(bernoulli(rng, threshold, (..., 8)), axis=-1)``:
    the byte is the cell, in the exact cumulative distribution of the 256 byte values
    (:class:`ByteTables`), of a uniform number in [0, 1) whose binary digits are drawn lazily
    (Knuth & Yao 1976; the interval algorithm of Han & Hoshi, IEEE Trans. IT 1997). Where
    most 8-bit heads decide (``_HEADS_DECIDING``), its first 8 bits decide the byte when their
    interval lies in one cell (``head``) and the others take 8 more bits; elsewhere 16 bits are
    drawn at once. The 16-bit lane which decides it by table lookup unless one of the 255 boundaries
    falls inside its interval (probability at most 255 / 2**16); those draws take one more
    64-bit word, and the ties that leaves (probability about 2**-64 each) more words, in exact
    integer arithmetic. Stopping after 8 bits is exact: every 16-bit lane of such an interval
    gives the same byte.
    Bit-vector mechanisms use it for their bit rows without memoization (their perturb keeps
    its stream, which a keyed permanent response must reproduce).
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    count = int(np.prod(shape, dtype=np.int64))
    tables = byte_tables(threshold)
    if np.count_nonzero(tables.head != 256) < _HEADS_DECIDING:  # 16-bit lanes at once
        lanes = raw_words(rng, -(-count // 4)).view(np.uint16)[:count]
        out = _lookup(tables.lane, lanes)
        _refine_straddles(tables, lanes, out, rng)
        return out.astype(np.uint8).reshape(shape)
    heads = raw_words(rng, -(-count // 8)).view(np.uint8)[:count]
    out = _lookup(tables.head, heads)
    later = np.flatnonzero(out == 256)
    if later.size:
        lanes = heads[later].astype(np.uint16) << np.uint16(8)
        lanes |= raw_words(rng, -(-later.size // 8)).view(np.uint8)[: later.size]
        decided = _lookup(tables.lane, lanes)
        _refine_straddles(tables, lanes, decided, rng)
        out[later] = decided
    return out.astype(np.uint8).reshape(shape)


def _refine_straddles(
    tables: ByteTables,
    lanes: npt.NDArray[np.uint16],
    out: npt.NDArray[np.uint16],
    rng: RandomSource | None,
) -> None:
    """The looked-up bytes of straddling lanes (256) refined in place (:func:`_refine_bytes`)."""
    straddle = np.flatnonzero(out == 256)
    if straddle.size:
        refined, _ = _refine_bytes(
            tables,
            lanes[straddle].astype(np.int64),
            raw_words(rng, straddle.size),
            lambda size: raw_words(rng, size),
        )
        out[straddle] = refined


def _lookup(table: npt.NDArray[np.uint16], lanes: npt.NDArray[Any]) -> npt.NDArray[np.uint16]:
    """``table[lanes]`` block by block (numpy widens each block's indexes to intp first)."""
    out = np.empty(lanes.size, dtype=np.uint16)
    for start in range(0, lanes.size, _LOOKUP_BLOCK):
        stop = start + _LOOKUP_BLOCK
        np.take(table, lanes[start:stop], out=out[start:stop])
    return out


def random_bits(rng: RandomSource | None, size: int) -> npt.NDArray[np.bool_]:
    """``size`` fair coin flips (64 per word)."""
    words = raw_words(rng, (int(size) + 63) // 64)
    bits = np.unpackbits(words.view(np.uint8))
    return bits[: int(size)].astype(bool)


def sample_subsets(rng: RandomSource | None, n: int, d: int, k: int) -> npt.NDArray[np.int64]:
    """n independent uniform k-subsets of [0, d), each sorted: shape (n, k).

    Floyd's algorithm (Bentley & Floyd, CACM 1987), vectorized over the n rows: for j = d-k..d-1
    draw r uniform in [0, j]; take r unless the row already holds it, then take j.
    """
    if k == d:
        return np.tile(np.arange(d, dtype=np.int64), (n, 1))
    chosen = np.empty((n, k), dtype=np.int64)
    for i, j in enumerate(range(d - k, d)):
        r = uniform_below(rng, j + 1, n)
        if i:
            seen = (chosen[:, :i] == r[:, None]).any(axis=1)
            r = np.where(seen, j, r)
        chosen[:, i] = r
    chosen.sort(axis=1)
    return chosen
