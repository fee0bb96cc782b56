"""PEM: prefix-extending method over optimized local hashing, for strings of an unknown domain.

Wang, Li, Jha, "Locally Differentially Private Heavy Hitter Identification", arXiv 1708.06674
(IEEE TDSC 2019); docs/math/heavy-hitters.md. A value is a bit string of ``total_bits`` bits:
its length in ``length_bits`` bits, then its symbols of ``symbol_bits`` = w bits, padded with
the symbol 0 to ``max_length`` symbols (so the length, hence the string, is recoverable from the
bits). By default the symbols are the UTF-8 bytes (w = 8, any string); a campaign whose values
are written in a known ``alphabet`` of A characters (search terms in a-z, hex ids) has as
symbols the characters' indices in it, w = max(1, ceil(log2 A)) bits, and ``max_length``
counts characters (26 letters: 5 bits, not 8). Level i
(0 <= i < levels) covers the first b_i = min(start_bits + i * step_bits, total_bits) bits. Each
device belongs to one level, uniformly, from its keyed source (``permanent=``: the same level on
every report) or, in simulation, from ``rng``; never from the value. It reports the prefix of
its level with local hashing at the full epsilon:

- the prefix is cut into T_i chunks of 30 bits x_0 .. x_{T_i - 1} (the last one shorter);
- a fresh seed (a_0 .. a_{T_i - 1}, b), each uniform in [0, P), P = 2**31 - 1, gives
  r = (sum_t a_t x_t + b) mod P and the bucket h = floor(g r / P) in [0, g);
- randomized response over the g buckets keeps h with probability p = e^eps/(e^eps + g - 1)
  (a threshold on 64-bit words, rounded down), else reports one of the other g - 1 uniformly.

The report is (level, seed, y). Exactness: for two different prefixes x != x', some chunk
differs, so (r_x, r_x') is uniform over [0, P)^2 (the a_t of a differing chunk makes the
difference uniform, b the first residue), and P[h(x) = h(x')] = c = sum_j m_j^2 / P^2 exactly
(m_j the size of bucket j). A non-holder supports v with probability q* = p c + (1-p)(1-c)/(g-1),
exactly, and given the seed the channel is randomized response over [g], whose worst ratio is
p (g - 1)/(1 - p) <= e^eps. The level is independent of the value, so a report is eps-LDP.

The server side (level-by-level extension, confirmation) is ``analysis.kinds.discovery.estimate``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import is_plain_int, widest_int
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
    claim_event,
)
from client_sdk.mechanisms.grr import compose_keep, keep_or_other, other_probability
from client_sdk.mechanisms.memoization import (
    MAX_THRESHOLD,
    DeviceKeyed,
    KeyedSource,
    check_keyed_source,
    largest_threshold,
    log_fraction,
)
from client_sdk.mechanisms.privacy import ChannelEvent, PrivacyEvent
from client_sdk.mechanisms.strings import RESERVED, MemoizedStrings, distinct_strings, memo_label
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    probability_threshold,
    threshold_probability,
    uniform_below,
)

__all__ = ["CHUNK_BITS", "PEM", "PRIME", "MemoizedPEM"]

PRIME = (1 << 31) - 1
CHUNK_BITS = 30
MAX_LENGTH = 32
"""Largest ``max_length`` in symbols (a prefix of at most 262 bits: 9 chunks)."""
MAX_ALPHABET = 256
"""Largest alphabet (8 bits a character; a larger one is no shorter than UTF-8's bytes)."""

LEVEL_LABEL = "pem:level"
"""The keyed-source label of a device's level."""

BLOCK_CELLS = 1 << 16
"""Report x low part cells the server hashes at once, for one group (9 bytes a cell in use)."""
BASE_CELLS = 1 << 13
"""Report x group cells whose hash bases the server computes at once (64 KiB of int64: a
larger temporary is a fresh mapping whose page faults cost more than the arithmetic)."""


def _fold(v: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """A number congruent to v modulo P = 2**31 - 1 and below 2**32 (v < 2**63)."""
    return (v & PRIME) + (v >> 31)


def _reduce(v: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """v mod P for 0 <= v < 2**36 (the fold leaves less than 2P)."""
    v = _fold(v)
    v[v >= PRIME] -= PRIME
    return v


@functools.lru_cache(maxsize=64)
def _leading_bits(allowed: frozenset[int], bits: int) -> frozenset[int]:
    """The first ``bits`` bits of each allowed byte."""
    return frozenset(b >> (8 - bits) for b in allowed)


def _symbol_bits(size: int) -> int:
    """w = max(1, ceil(log2 size)): the bits of an index into an alphabet of ``size``."""
    return max(1, (size - 1).bit_length())


def _row_groups(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """A number per row of ``keys`` (int64 rows of 30-bit chunks), equal for equal rows: two
    chunks are packed a word, so one or two chunks need a 1-D ``np.unique`` only."""
    packed = keys[:, 0::2] << CHUNK_BITS
    packed[:, : keys[:, 1::2].shape[1]] |= keys[:, 1::2]
    if packed.shape[1] == 1:
        inverse = np.unique(packed[:, 0], return_inverse=True)[1]
    else:
        inverse = np.unique(packed, axis=0, return_inverse=True)[1]
    return np.asarray(inverse, dtype=np.int64).reshape(-1)


def _check_alphabet(alphabet: Any) -> str | None:
    """None, or a string of 1 to 256 distinct characters (else a ValueError naming it)."""
    if alphabet is None:
        return None
    if not isinstance(alphabet, str) or not alphabet:
        raise ValueError(
            "alphabet must be a non-empty string of the distinct characters values use; got "
            f"{alphabet!r}"
        )
    repeated = "".join(sorted({c for c in alphabet if alphabet.count(c) > 1}))
    if repeated:
        raise ValueError(f"alphabet must not repeat a character; got {alphabet!r} ({repeated!r})")
    if len(alphabet) > MAX_ALPHABET:
        raise ValueError(
            f"alphabet must have at most {MAX_ALPHABET} characters (more: leave it out, UTF-8 "
            f"bytes); got {len(alphabet)}"
        )
    try:
        alphabet.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"alphabet must be valid Unicode (no lone surrogate); got {alphabet!r}"
        ) from None
    return alphabet


@dataclasses.dataclass(frozen=True)
class PEM(DeviceKeyed, Mechanism):
    """The prefix-extending method (module docstring).

    Config fields: ``epsilon``; ``max_length`` bytes of UTF-8 (1 to 32), or characters with an
    ``alphabet``; ``start_bits`` the prefix of level 0 (at least ``length_bits``); ``step_bits``
    the bits each level adds (1 to 12); ``g`` the hash range (default round(e^eps + 1), OLH's);
    ``alphabet`` (optional) the distinct characters values are written in, at most 256 (module
    docstring). Defaults: bytes, start length_bits + 4 and step 4 (half a byte a level); with an
    alphabet, one character a level (start length_bits + w, step w: measured the best recall and
    decoding time at n = 20,000 over a-z, heavy-hitters.md). Reports: ``level``, ``seed`` (the
    a_t then b, zero beyond the level's chunks, b last) and ``y``; on the wire
    ``{"level": i, "seed": [a_0, ..., b], "y": y}``.
    """

    epsilon: float
    max_length: int
    start_bits: int | None = None
    step_bits: int | None = None
    g: int | None = None
    final_weight: int = 1
    alphabet: str | None = None

    name: ClassVar[str] = "pem"

    def null_detection_frequency(self, n: int, critical: float) -> tuple[float, str] | None:
        """The last level's null error (n / levels reports; Wang et al. 2019, PEM): a string
        is called at ``critical`` sqrt(q*(1 - q*) / n_last) / (p* - q*)."""
        p, q = self.p_star, self.q_star
        n_last = n / self.levels
        frequency = critical * math.sqrt(q * (1 - q) / n_last) / (p - q)
        note = "PEM's last level (n / levels reports), Bonferroni over the vocabulary's size"
        return frequency, note

    @staticmethod
    def longitudinal_variant() -> type[MemoizedPEM]:
        """The class of this mechanism under ``"longitudinal"``."""
        return MemoizedPEM

    uses_device_choices: ClassVar[bool] = True
    value_kind: ClassVar[Literal["category", "number", "string"]] = "string"
    estimate_kind: ClassVar[str] = "discovery"
    discovery: ClassVar[str | None] = "prefixes"
    reads_reports: ClassVar[bool] = True
    tests_candidates: ClassVar[bool] = True

    def __post_init__(self) -> None:
        epsilon = check_epsilon(self.epsilon)
        if epsilon > 30:
            raise ValueError(f"epsilon must be at most 30 for pem; got {self.epsilon!r}")
        max_length = check_int(self.max_length, "max_length", minimum=1, maximum=MAX_LENGTH)
        alphabet = _check_alphabet(self.alphabet)
        length_bits = max_length.bit_length()
        symbol = 8 if alphabet is None else _symbol_bits(len(alphabet))
        total = length_bits + symbol * max_length
        default = 4 if alphabet is None else symbol
        start = length_bits + default if self.start_bits is None else self.start_bits
        start = check_int(start, "start_bits", minimum=length_bits, maximum=total)
        step = default if self.step_bits is None else self.step_bits
        step = check_int(step, "step_bits", minimum=1, maximum=12)
        g = max(2, round(math.exp(epsilon) + 1)) if self.g is None else self.g
        g = check_int(g, "g", minimum=2, maximum=1 << 16)
        final = check_int(self.final_weight, "final_weight", minimum=1, maximum=1 << 16)
        for field, value in (
            ("final_weight", final),
            ("epsilon", epsilon),
            ("max_length", max_length),
            ("start_bits", start),
            ("step_bits", step),
            ("g", g),
            ("alphabet", alphabet),
        ):
            object.__setattr__(self, field, value)

    # ---- the bit strings ----------------------------------------------------------------------

    @cached_property
    def length_bits(self) -> int:
        return int(self.max_length).bit_length()

    @cached_property
    def symbol_bits(self) -> int:
        """w: 8 (a UTF-8 byte), or max(1, ceil(log2 A)) for an alphabet of A characters."""
        return 8 if self.alphabet is None else _symbol_bits(len(self.alphabet))

    @cached_property
    def symbols(self) -> int:
        """How many symbols are valid: 256 bytes, or the A characters (codes 0 .. A - 1)."""
        return 256 if self.alphabet is None else len(self.alphabet)

    @cached_property
    def total_bits(self) -> int:
        return self.length_bits + self.symbol_bits * self.max_length

    @cached_property
    def levels(self) -> int:
        """1 + ceil((total_bits - start_bits) / step_bits)."""
        assert self.start_bits is not None and self.step_bits is not None
        return 1 + -(-(self.total_bits - self.start_bits) // self.step_bits)

    def level_bits(self, level: int) -> int:
        """b_i: the prefix length of level i."""
        assert self.start_bits is not None and self.step_bits is not None
        return min(self.start_bits + level * self.step_bits, self.total_bits)

    def chunk_count(self, level: int) -> int:
        return -(-self.level_bits(level) // CHUNK_BITS)

    @property
    def seed_width(self) -> int:
        return self.chunk_count(self.levels - 1) + 1

    def value_bits(self, values: Sequence[bytes]) -> npt.NDArray[np.uint8]:
        """The bit strings of values (UTF-8 bytes, checked by ``distinct_strings``): shape
        ``(len(values), total_bits)``. The reserved symbol (``strings.RESERVED``, a value the
        campaign cannot carry) is length 0 with first symbol 1: no value's bit string, since
        a value of length 0 has only zero symbols (so discovery never reports it either)."""
        reserved = np.fromiter((v == RESERVED for v in values), dtype=bool, count=len(values))
        if reserved.any():
            bits = self.value_bits([b"" if r else v for r, v in zip(reserved, values, strict=True)])
            bits[reserved, self.length_bits + self.symbol_bits - 1] = 1
            return bits
        count = len(values)
        padded = np.zeros((count, self.max_length), dtype=np.uint8)
        lengths = np.zeros(count, dtype=np.int64)
        if count:
            joined = np.frombuffer(b"".join(values), dtype=np.uint8)
            lengths = np.fromiter(map(len, values), dtype=np.int64, count=count)
            symbols = joined
            if self.alphabet is not None:
                # characters start at the bytes that are not UTF-8 continuations (10xxxxxx)
                starts = np.r_[0, np.cumsum((joined & 0xC0) != 0x80)]
                ends = np.cumsum(lengths)
                lengths = starts[ends] - starts[ends - lengths]
                symbols = self._codes(b"".join(values).decode("utf-8"))
            if lengths.max(initial=0) > self.max_length:
                raise ValueError(f"{self.name}: a value is longer than max_length")
            row = np.repeat(np.arange(count), lengths)
            column = np.arange(symbols.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            padded[row, column] = symbols
        shifts = np.arange(self.length_bits - 1, -1, -1)
        length_part = ((lengths[:, None] >> shifts) & 1).astype(np.uint8)
        if self.alphabet is None:
            return np.concatenate([length_part, np.unpackbits(padded, axis=1)], axis=1)
        w = self.symbol_bits
        symbol_part = (padded[:, :, None] >> np.arange(w - 1, -1, -1, dtype=np.uint8)) & 1
        return np.concatenate([length_part, symbol_part.reshape(count, w * self.max_length)], 1)

    @cached_property
    def _code_table(self) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint8]]:
        """The alphabet's code points sorted, and each one's index in the alphabet."""
        assert self.alphabet is not None
        points = np.frombuffer(self.alphabet.encode("utf-32-le"), dtype=np.uint32)
        order = np.argsort(points, kind="stable")
        return points[order], order.astype(np.uint8)

    def _codes(self, text: str) -> npt.NDArray[np.uint8]:
        """Each character's index in the alphabet (a character outside it is refused)."""
        points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        table, index = self._code_table
        where = np.minimum(np.searchsorted(table, points), table.size - 1)
        if not np.array_equal(table[where], points):
            raise ValueError(f"{self.name}: a value has a character outside the alphabet")
        return index[where]

    def chunks(self, bits: npt.NDArray[np.uint8], level: int) -> npt.NDArray[np.int64]:
        """The 30-bit chunks of the level-i prefixes of bit strings: shape ``(n, T_i)``."""
        width = self.level_bits(level)
        count = self.chunk_count(level)
        out = np.zeros((bits.shape[0], count), dtype=np.int64)
        for t in range(count):
            piece = bits[:, t * CHUNK_BITS : min(width, (t + 1) * CHUNK_BITS)].astype(np.int64)
            weights = 1 << np.arange(piece.shape[1] - 1, -1, -1, dtype=np.int64)
            out[:, t] = piece @ weights
        return out

    def prefix_chunks(self, prefixes: Sequence[int], level: int) -> npt.NDArray[np.int64]:
        """Chunks of level-i prefixes given as integers of b_i bits (the server's candidates)."""
        width = self.level_bits(level)
        count = self.chunk_count(level)
        out = np.zeros((len(prefixes), count), dtype=np.int64)
        for t in range(count):
            low = t * CHUNK_BITS
            high = min(width, low + CHUNK_BITS)
            mask = (1 << (high - low)) - 1
            out[:, t] = [(p >> (width - high)) & mask for p in prefixes]
        return out

    # ---- implemented probabilities --------------------------------------------------------

    @cached_property
    def _keep_threshold(self) -> int:
        e = Fraction(math.exp(self.epsilon))
        assert self.g is not None
        return probability_threshold(e / (e + self.g - 1), rounding="down")

    @cached_property
    def keep_probability(self) -> Fraction:
        return threshold_probability(self._keep_threshold)

    @cached_property
    def collision_probability(self) -> Fraction:
        """c = P[h(x) = h(x')] for x != x' (module docstring): sum_j m_j^2 / P^2."""
        assert self.g is not None
        q, rem = divmod(PRIME, self.g)
        return Fraction(rem * (q + 1) ** 2 + (self.g - rem) * q * q, PRIME * PRIME)

    @property
    def p_star(self) -> float:
        return float(self.keep_probability)

    @cached_property
    def q_star(self) -> float:
        p, c = self.keep_probability, self.collision_probability
        assert self.g is not None
        return float(p * c + (1 - p) * (1 - c) / (self.g - 1))

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def privacy_event(self) -> PrivacyEvent:
        return ChannelEvent(self, fallback=claim_event(self))

    # ---- device side ---------------------------------------------------------------------

    @property
    def level_weights(self) -> npt.NDArray[np.int64]:
        """Integer weights of the levels: 1 each, and ``final_weight`` for the last."""
        weights = np.ones(self.levels, dtype=np.int64)
        weights[-1] = self.final_weight
        return weights

    @property
    def level_probabilities(self) -> npt.NDArray[np.float64]:
        weights = self.level_weights
        return np.asarray(weights / weights.sum(), dtype=np.float64)

    def draw_levels(self, rng: RandomSource | None, n: int) -> npt.NDArray[np.int64]:
        """n levels, level i with probability weight_i / sum of the weights, exactly."""
        cumulative = np.cumsum(self.level_weights)
        u = uniform_below(rng, int(cumulative[-1]), n)
        return np.searchsorted(cumulative, u, side="right").astype(np.int64)

    def level_of(self, permanent: KeyedSource) -> int:
        """The device's level (``draw_levels``) from its keyed source, fixed for good."""
        keys = check_keyed_source(permanent, self.name)
        return int(self.draw_levels(keys.source(LEVEL_LABEL, 0), 1)[0])

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One report per value: the device's level (``permanent``) or a level drawn from
        ``rng`` per report (a simulated population of devices), never from the value."""
        distinct, inverse = distinct_strings(values, self.max_length, self.name, self.alphabet)
        n = inverse.size
        if permanent is not None:
            levels = np.full(n, self.level_of(permanent), dtype=np.int64)
        else:
            levels = self.draw_levels(rng, n)
        out = np.zeros(n, dtype=self.report_dtype)
        out["level"] = levels
        if not n:
            return out
        bits = self.value_bits(distinct)
        seeds = uniform_below(rng, PRIME, n * self.seed_width).reshape(n, self.seed_width)
        hashed = np.zeros(n, dtype=np.int64)
        for level in np.unique(levels):
            rows = np.flatnonzero(levels == level)
            count = self.chunk_count(int(level))
            seeds[rows, count:-1] = 0  # only the level's chunks carry a coefficient
            x = self.chunks(bits, int(level))[inverse[rows]]
            hashed[rows] = self.bucket(seeds[rows], x)
        out["seed"] = seeds
        assert self.g is not None
        out["y"] = keep_or_other(rng, hashed, self._keep_threshold, self.g)
        return out

    def bucket(
        self, seeds: npt.NDArray[np.int64], chunks: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """h = floor(g r / P), r = (sum_t a_t x_t + b) mod P; broadcasts seeds against chunks
        on the leading axes (chunks on the last axis)."""
        r = np.broadcast_to(
            seeds[..., -1], np.broadcast_shapes(seeds.shape[:-1], chunks.shape[:-1])
        )
        r = np.array(r, dtype=np.int64)
        for t in range(chunks.shape[-1]):
            r = (r + seeds[..., t] * chunks[..., t]) % PRIME
        assert self.g is not None
        return (r * self.g) // PRIME

    # ---- wire ------------------------------------------------------------------------------

    @property
    def report_dtype(self) -> np.dtype[Any]:
        return np.dtype(
            [("level", np.int16), ("seed", np.int64, (self.seed_width,)), ("y", np.int32)]
        )

    def _check(self, reports: Reports) -> Reports:
        array = np.asarray(reports)
        if array.dtype != self.report_dtype or array.ndim != 1:
            raise ValueError(f"reports must be a 1-D array of dtype {self.report_dtype}")
        return array

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        last = self.levels - 1
        assert self.g is not None
        return {
            "level": widest_int(0, self.levels),
            "seed": [PRIME - 1] * (self.chunk_count(last) + 1),
            "y": widest_int(0, self.g),
        }

    def to_wire(self, reports: Reports) -> list[Any]:
        array = self._check(reports)
        out = []
        for level, seed, y in zip(array["level"], array["seed"], array["y"], strict=True):
            count = self.chunk_count(int(level))
            out.append(
                {
                    "level": int(level),
                    "seed": [int(s) for s in seed[:count]] + [int(seed[-1])],
                    "y": int(y),
                }
            )
        return out

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        good: list[tuple[int, list[int], int]] = []
        errors: list[WireFormatError] = []
        for index, payload in enumerate(payloads):
            problem = self._payload_problem(payload)
            if problem:
                errors.append(WireFormatError(index, problem))
            else:
                good.append((int(payload["level"]), payload["seed"], int(payload["y"])))
        out = np.zeros(len(good), dtype=self.report_dtype)
        for i, (level, seed, y) in enumerate(good):
            out["level"][i] = level
            out["seed"][i, : len(seed) - 1] = seed[:-1]
            out["seed"][i, -1] = seed[-1]
            out["y"][i] = y
        return out, errors

    def _payload_problem(self, payload: Any) -> str:
        fields = {"level", "seed", "y"}
        if not isinstance(payload, dict) or set(payload) != fields:
            got = sorted(map(str, payload)) if isinstance(payload, dict) else None
            return "payload must be an object with exactly level, seed and y; got " + (
                f"fields {got}" if got is not None else type(payload).__name__
            )
        level, seed, y = payload["level"], payload["seed"], payload["y"]
        if not is_plain_int(level) or not 0 <= int(level) < self.levels:
            return f"level must be an integer in [0, {self.levels}); got {level!r}"
        want = self.chunk_count(int(level)) + 1
        if not isinstance(seed, list) or len(seed) != want:
            return f"seed of level {level} must be a list of {want} integers"
        if not all(is_plain_int(s) and 0 <= int(s) < PRIME for s in seed):
            return f"seed entries must be integers in [0, {PRIME})"
        assert self.g is not None
        if not is_plain_int(y) or not 0 <= int(y) < self.g:
            return f"y must be an integer in [0, {self.g}); got {y!r}"
        return ""

    # ---- server side ---------------------------------------------------------------------

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.levels, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Reports per level. Discovery needs the reports themselves (which prefixes to score
        depends on the previous levels), so ``analysis.kinds.discovery.estimate`` reads them, not
        this."""
        array = self._check(reports)
        counts = np.bincount(array["level"].astype(np.int64), minlength=self.levels)
        return AggregateStatistic(counts.astype(np.int64), int(array.size))

    def support_counts(
        self, reports: Reports, level: int, prefixes: npt.NDArray[np.int64] | Sequence[int]
    ) -> npt.NDArray[np.int64]:
        """How many of the level's reports support each prefix (``h_seed(prefix) == y``).

        ``prefixes``: their chunks, an int64 array of shape ``(k, chunk_count(level))``
        (``prefix_chunks``), or the prefixes as integers of ``level_bits(level)`` bits.

        Vectorized over blocks of reports x prefixes. A prefix's last chunk is H * 2^s + lo
        with lo its last s = min(step_bits, bits of the chunk) bits, so r = base + a_last lo
        (mod P) with base = b + sum_t a_t x_t (last chunk H * 2^s) the same for the 2^s prefixes
        of one group (one parent, extended). ``base - low_y`` is computed once per report and
        group (in int64: each a_t x_t < 2^61 folded modulo the Mersenne prime with shifts), and
        each of the (at most 2^s) low parts in use costs an add and a reduction in uint32
        (r < 2P < 2^32, r mod P = min(r, r - P) with wrap-around) and one compare: "h(prefix)
        == y" is "r - low_y mod P < width_y", [low_y, low_y + width_y) = [ceil(yP/g),
        ceil((y+1)P/g)) (no division).
        """
        array = self._check(reports)
        mine = array["level"] == level
        if not mine.all():
            array = array[mine]
        x = self._candidate_chunks(prefixes, level)
        if not x.shape[0] or not array.size:
            return np.zeros(x.shape[0], dtype=np.int64)
        count = self.chunk_count(level)
        assert self.step_bits is not None
        shift = min(self.level_bits(level) - CHUNK_BITS * (count - 1), self.step_bits)
        keys = np.concatenate([x[:, :-1], (x[:, -1:] >> shift) << shift], axis=1)
        group_of = _row_groups(keys)
        grouped = np.bincount(group_of)[group_of] > 1
        out = np.zeros(x.shape[0], dtype=np.int64)
        # a prefix alone in its group (a finished string) costs one cell, not one per low part
        for members, bits in ((grouped, shift), (~grouped, 0)):
            if members.any():
                out[members] = self._supports(array, x[members], group_of[members], count, bits)
        return out

    def _supports(
        self,
        array: Reports,
        x: npt.NDArray[np.int64],
        group_of: npt.NDArray[np.int64],
        count: int,
        shift: int,
    ) -> npt.NDArray[np.int64]:
        """``support_counts`` of the chunks x, whose groups (all but their last ``shift``
        bits) are numbered ``group_of``."""
        suffixes, low_of = np.unique(x[:, -1] & ((1 << shift) - 1), return_inverse=True)
        _, first, group_of = np.unique(group_of, return_index=True, return_inverse=True)
        groups = np.concatenate([x[first, :-1], (x[first, -1:] >> shift) << shift], axis=1)
        assert self.g is not None
        edges = -(-np.arange(self.g + 1, dtype=np.int64) * PRIME // self.g)
        y = array["y"].astype(np.int64)
        low = edges[y]
        width = (edges[y + 1] - low).astype(np.uint32)
        prime = np.uint32(PRIME)
        full = np.zeros((first.size, suffixes.size), dtype=np.int64)
        # `rows` reports a block, on the last axis (every operation runs along it,
        # contiguous); the bases of `per_base` groups at once and the cells of `per_op`
        # groups a pass, in buffers allocated once that stay in cache
        lows = suffixes.size
        rows = min(y.size, max(64, BLOCK_CELLS // lows))
        per_base = max(1, BASE_CELLS // rows)
        per_op = max(1, BLOCK_CELLS // (lows * rows))
        r = np.empty((min(per_op, first.size), lows, rows), dtype=np.uint32)
        wrapped = np.empty_like(r)
        hits = np.empty(r.shape, dtype=bool)
        columns = [groups[:, t : t + 1] for t in range(count)]
        seed = array["seed"]
        for start in range(0, y.size, rows):
            k = min(rows, y.size - start)
            block = slice(start, start + k)
            coefficients = np.ascontiguousarray(seed[block, :count].T)
            offset = seed[block, -1] + (PRIME - low[block])
            under = width[block]
            added = ((suffixes[:, None] * seed[None, block, count - 1]) % PRIME).astype(np.uint32)
            for g0 in range(0, first.size, per_base):
                chosen = slice(g0, g0 + per_base)
                # a_t x_t < 2^31 2^30: exact in int64; folded each is below 2^32 + 2^30, so
                # the sum over at most 9 chunks and the offset (< 2P) is below 2^36
                total = _fold(columns[0][chosen] * coefficients[0]) + offset
                for t in range(1, count):
                    total += _fold(columns[t][chosen] * coefficients[t])
                base = _reduce(total).astype(np.uint32)
                if lows == 1 and suffixes[0] == 0:  # no low part: base is r - low_y
                    full[chosen, 0] += (base < under).sum(axis=1)
                    continue
                for h0 in range(0, base.shape[0], per_op):
                    part = base[h0 : h0 + per_op]
                    j = part.shape[0]
                    cell, other, hit = r[:j, :, :k], wrapped[:j, :, :k], hits[:j, :, :k]
                    np.add(part[:, None, :], added[None, :, :], out=cell)
                    np.subtract(cell, prime, out=other)  # r < 2P < 2^32: r mod P = min(r, r - P)
                    np.minimum(cell, other, out=cell)
                    np.less(cell, under, out=hit)
                    full[g0 + h0 : g0 + h0 + j] += hit.view(np.uint8).sum(axis=2, dtype=np.uint32)
        return full[group_of.reshape(-1), low_of.reshape(-1)]

    def _candidate_chunks(
        self, prefixes: npt.NDArray[np.int64] | Sequence[int], level: int
    ) -> npt.NDArray[np.int64]:
        if isinstance(prefixes, np.ndarray) and prefixes.ndim == 2:
            want = self.chunk_count(level)
            if prefixes.shape[1] != want or prefixes.dtype != np.int64:
                raise ValueError(
                    f"prefix chunks of level {level} must be int64 of shape (k, {want}); "
                    f"got {prefixes.dtype} {prefixes.shape}"
                )
            return prefixes
        return self.prefix_chunks([int(p) for p in prefixes], level)

    def plausible(self, prefix: int, level: int) -> bool:
        """Whether some value has this level-i prefix: a length of at most max_length, valid
        symbols within the length (with an alphabet: the covered bits of each can start a code
        below A) and zero bits past it (the server prunes the other candidates)."""
        width = self.level_bits(level)
        length = prefix >> (width - self.length_bits)
        if length > self.max_length:
            return False
        w = self.symbol_bits
        used = self.length_bits + w * length
        if width > used and prefix & ((1 << (width - used)) - 1):
            return False
        if self.symbols == 1 << w:
            return True
        for j in range(min(length, -(-(width - self.length_bits) // w))):
            start = self.length_bits + w * j
            bits = min(w, width - start)
            pattern = (prefix >> (width - start - bits)) & ((1 << bits) - 1)
            if pattern << (w - bits) >= self.symbols:
                return False
        return True

    def within(self, prefix: int, level: int, allowed: frozenset[int]) -> bool:
        """Whether the bytes a plausible level-i prefix covers, wholly or in part, within the
        string's length, can all be bytes of ``allowed`` (a decoder's hint for a campaign of
        UTF-8 bytes: the values are written in a known alphabet)."""
        if self.alphabet is not None:
            raise ValueError("pem: the byte hint 'within' is for campaigns without an alphabet")
        width = self.level_bits(level)
        length = prefix >> (width - self.length_bits)
        covered = min(length, -(-(width - self.length_bits) // 8))
        for j in range(covered):
            start = self.length_bits + 8 * j
            bits = min(8, width - start)
            pattern = (prefix >> (width - start - bits)) & ((1 << bits) - 1)
            if pattern not in _leading_bits(allowed, bits):
                return False
        return True

    def extensions(
        self, width: int, bits: int, length: int, tail: int, allowed: frozenset[int] | None = None
    ) -> list[int]:
        """The suffixes s of ``bits`` bits (increasing) that extend a plausible prefix of
        ``width`` >= length_bits bits, of this ``length``, whose last partly covered symbol's
        bits so far are ``tail`` (the last (width - length_bits) mod w bits), to a plausible
        prefix; with ``allowed`` (byte campaigns: ``within``'s hint) every byte within the
        length must start as one of those. All suffixes at once (numpy, no per-suffix loop)."""
        w = self.symbol_bits
        partial = (width - self.length_bits) % w
        first = (width - self.length_bits) // w  # the symbol the tail (or the suffix) starts
        total = partial + bits
        combined = (tail << bits) | np.arange(1 << bits, dtype=np.int64)
        ok = np.ones(combined.size, dtype=bool)
        for j, position in enumerate(range(0, total, w)):
            take = min(w, total - position)
            symbol = (combined >> (total - position - take)) & ((1 << take) - 1)
            if first + j >= length:
                ok &= symbol == 0
            elif allowed is not None:
                ok &= np.isin(symbol, list(_leading_bits(allowed, take)))
            elif self.symbols < 1 << w:
                ok &= symbol << (w - take) < self.symbols
        suffixes: list[int] = np.flatnonzero(ok).tolist()
        return suffixes

    def complete(self, prefix: int, level: int) -> bool:
        """Whether a plausible level-i prefix determines its string: it covers the length and
        every symbol the length says (the rest of the bit string is zero padding)."""
        width = self.level_bits(level)
        length = prefix >> (width - self.length_bits)
        return width >= self.length_bits + self.symbol_bits * length

    def decode_prefix(self, prefix: int) -> str | None:
        """The string whose whole bit string is ``prefix``, or None (not a value: a length
        over max_length, bits past the length, a code outside the alphabet, or not UTF-8)."""
        w = self.symbol_bits
        body = w * self.max_length
        length = prefix >> body
        if length > self.max_length or prefix & ((1 << (body - w * length)) - 1):
            return None
        if self.alphabet is not None:
            mask = (1 << w) - 1
            codes = [(prefix >> (body - w * (j + 1))) & mask for j in range(length)]
            if codes and max(codes) >= self.symbols:
                return None
            return "".join([self.alphabet[c] for c in codes])
        data = (prefix & ((1 << body) - 1)).to_bytes(self.max_length, "big")
        try:
            return data[:length].decode("utf-8")
        except UnicodeDecodeError:
            return None

    def frequency_variance(
        self, n_level: int | npt.NDArray[np.int64], n: int, f: float | FloatArray
    ) -> FloatArray:
        """Var of the estimate (C/n_i - q*)/(p* - q*) of a frequency f from n_i reports (one
        level's, or several levels' pooled; heavy-hitters.md): the randomized response, plus
        the sampling of those devices from the n."""
        p, q = self.p_star, self.q_star
        f = np.asarray(f, dtype=np.float64)
        per_user = q * (1 - q) / (p - q) ** 2 + f * (1 - p - q) / (p - q)
        sampling = f * (1 - f) * np.maximum(0.0, 1 - np.asarray(n_level) / n)
        return np.asarray((per_user + sampling) / n_level, dtype=np.float64)

    # ---- exact privacy ---------------------------------------------------------------------

    def check_seeds(self, level: int) -> list[npt.NDArray[np.int64]]:
        """Seeds ``channel_matrices`` conditions on: all-zero (every input collides), a = 1,
        b = 0 (the identity on r), and two fixed arbitrary ones."""
        width = self.chunk_count(level) + 1
        fixed = np.random.default_rng(level).integers(0, PRIME, size=(2, width))
        return [np.zeros(width, np.int64), np.r_[np.ones(width - 1, np.int64), 0], *fixed]

    def channel_matrices(self) -> Iterator[FloatArray]:
        """P[(level, y) | value, seed] over every bit string of a value (max_length 1 only: ""
        and every byte, or every character of the alphabet, then the reserved symbol): one
        matrix per level and check seed, the level's probability included."""
        if self.max_length != 1:
            raise ValueError("pem enumerates its channel only for max_length = 1")
        if self.alphabet is None:
            inputs = [b""] + [bytes([v]) for v in range(256)]
        else:
            inputs = [b""] + [c.encode() for c in self.alphabet]
        if RESERVED not in inputs:  # (with bytes, the byte 0xff is RESERVED: no UTF-8 text)
            inputs.append(RESERVED)  # what a value the campaign cannot carry sends
        bits = self.value_bits(inputs)
        p = self.keep_probability
        assert self.g is not None
        other = float(other_probability(p, self.g))
        for level in range(self.levels):
            x = self.chunks(bits, level)
            for seed in self.check_seeds(level):
                hashed = self.bucket(seed[None, :], x)
                matrix = np.full((len(inputs), self.g), other)
                matrix[np.arange(len(inputs)), hashed] = float(p)
                yield matrix * self.level_probabilities[level]

    def implemented_epsilon(self) -> float:
        return FrequencyOracle.implemented_epsilon(self)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class MemoizedPEM(MemoizedStrings, PEM):
    """PEM under ``"longitudinal"`` (client_sdk/mechanisms/strings.py).

    The device's level comes from its keyed source (as for plain PEM on a device); the PRR of a
    string is the whole level report (seed, y) of PEM at epsilon_permanent (keep probability p1),
    drawn from the string's stream; each report sends the PRR's seed and re-randomizes y by
    randomized response over the g buckets (keep p2). Given the seed this is L-GRR over [g]
    (RAPPOR's chain; local_hashing.py's L-LH): one report keeps the bucket with
    P' = p1 p2 + (1 - p1) q2, q2 = (1 - p2)/(g - 1), so epsilon_1 = ln(P'(g - 1)/(1 - P')), and
    the decoder's p* and q* are those of P'. ``g`` defaults to round(e^epsilon + 1) for the
    one-report epsilon, which makes the composed channel exactly OLH's at epsilon.
    """

    epsilon_permanent: float = dataclasses.field(kw_only=True)
    deterministic_pseudonym: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_permanent()
        _ = self._again_threshold  # refuse impossible configs now

    @cached_property
    def permanent(self) -> PEM:
        return PEM(
            self.epsilon_permanent,
            self.max_length,
            start_bits=self.start_bits,
            step_bits=self.step_bits,
            g=self.g,
            final_weight=self.final_weight,
            alphabet=self.alphabet,
        )

    @cached_property
    def _again_threshold(self) -> int:
        assert self.g is not None
        p1, g = self.permanent.keep_probability, self.g

        def ratio(threshold: int) -> Fraction:
            big, small = compose_keep(p1, threshold_probability(threshold), g)
            return big / small

        return largest_threshold(
            ratio, -(-WORD_SPAN // g), MAX_THRESHOLD, Fraction(math.exp(self.epsilon))
        )

    @property
    def again_keep_probability(self) -> Fraction:
        """p2: the instantaneous step's keep probability."""
        return threshold_probability(self._again_threshold)

    @cached_property
    def keep_probability(self) -> Fraction:
        """P' of one report (the composed randomized response over the g buckets)."""
        assert self.g is not None
        return compose_keep(self.permanent.keep_probability, self.again_keep_probability, self.g)[0]

    @property
    def epsilon_one(self) -> float:
        assert self.g is not None
        p = self.keep_probability
        return log_fraction(p / other_probability(p, self.g))

    def permanent_reports(self, distinct: Sequence[bytes], keys: KeyedSource) -> Reports:
        level = self.level_of(keys)
        plain = self.permanent
        out = np.zeros(len(distinct), dtype=self.report_dtype)
        out["level"] = level
        if not distinct:
            return out
        x = self.chunks(self.value_bits(distinct), level)
        count = self.chunk_count(level)
        assert self.g is not None
        for i, raw in enumerate(distinct):
            stream = keys.source(memo_label("pem:", raw), 0)
            seed = uniform_below(stream, PRIME, self.seed_width)
            seed[count:-1] = 0
            bucket = self.bucket(seed[None, :], x[i : i + 1])
            out["seed"][i] = seed
            out["y"][i] = keep_or_other(stream, bucket, plain._keep_threshold, self.g)[0]
        return out

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        out = np.array(permanent, copy=True)
        assert self.g is not None
        out["y"] = keep_or_other(rng, out["y"].astype(np.int64), self._again_threshold, self.g)
        return out

    @property
    def resend_probability(self) -> float:
        return float(self.again_keep_probability)

    @property
    def linkability(self) -> str:
        return (
            "the level is the device's for the campaign; the hash seed is the permanent "
            "response's, sent unchanged with every report of the string: a deterministic "
            "pseudonym of (device, campaign, string), as memoized local hashing's (the device's "
            "policy refuses it unless allow_pseudonymous_memoization); y equals the permanent "
            f"y with probability p2 = {float(self.again_keep_probability):.4g}"
        )
