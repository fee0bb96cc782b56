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

import hashlib
import hmac
import os
from fractions import Fraction
from typing import Union

import numpy as np
import numpy.typing as npt

__all__ = [
    "SYSTEM_RANDOM",
    "HmacWordSource",
    "RandomSource",
    "SystemRandomSource",
    "bernoulli",
    "bernoulli_lazy",
    "probability_threshold",
    "random_bits",
    "raw_words",
    "resolve_rng",
    "sample_subsets",
    "threshold_probability",
    "uniform_below",
    "uniform_below_32",
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
        h = int(high)  # type: ignore[arg-type]
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
