"""SFP: Apple's sequence fragment puzzle, discovery of strings with two sketches.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017; docs/math/heavy-hitters.md. A device holding the string w (at most
``max_length`` bytes of UTF-8, padded with zero bytes to ``max_length``) sends, in one report:

1. ``word``: an HCMS report (``client_sdk.mechanisms.sketch.HCMS``) of w at epsilon/2;
2. ``offset``: l uniform in [0, max_length), independent of w, in the clear;
3. ``fragment``: an HCMS report at epsilon/2, in the sketch of offset l, of the three bytes
   0xFF || tag(w) || w_padded[l], where tag(w) is the first byte of BLAKE2b(w, key = TAG_KEY ||
   seed) (0xFF, never a byte of UTF-8, keeps fragment strings apart from words).

Privacy: the two HCMS reports use independent randomness and the offset is independent of the
value, so by basic composition a report is (epsilon/2 + epsilon/2) = epsilon-LDP; the tag
travels only inside the randomized fragment. The word sketch and every offset's fragment sketch
are mergeable integer statistics, so the server decodes from the merged statistic alone
(``analysis.discovery.discover_sfp``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms._wire import is_plain_int
from client_sdk.mechanisms.base import AggregateStatistic, Mechanism, Reports, WireFormatError
from client_sdk.mechanisms.sketch import HCMS, MAX_SEED, distinct_strings
from client_sdk.randomness import RandomSource, uniform_below_32

__all__ = ["SFP", "TAG_KEY"]

TAG_KEY = b"ldp-telemetry/sfp-tag/v1"
MAX_LENGTH = 32
FRAGMENT_PREFIX = b"\xff"


@dataclasses.dataclass(frozen=True)
class SFP(Mechanism):
    """The sequence fragment puzzle (module docstring).

    Config fields: ``epsilon`` (split equally between the word and the fragment); ``max_length``
    bytes (1 to 32); ``m`` and ``hashes`` of the word sketch; ``fragment_m`` the width of each
    offset's fragment sketch (same ``hashes``); ``seed`` of the hash family and the tag.
    """

    epsilon: float
    max_length: int
    m: int = 1024
    hashes: int = 16
    fragment_m: int = 1024
    seed: int = 0

    name: ClassVar[str] = "sfp"
    value_kind: ClassVar[Literal["category", "number", "string"]] = "string"
    estimate_kind: ClassVar[str] = "discovery"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        length = check_int(self.max_length, "max_length", minimum=1, maximum=MAX_LENGTH)
        object.__setattr__(self, "max_length", length)
        seed = check_int(self.seed, "seed", minimum=0, maximum=MAX_SEED - 1)
        object.__setattr__(self, "seed", seed)
        self.word_sketch  # noqa: B018 -- validates m and hashes, naming the field
        self.fragment_sketch  # noqa: B018

    @cached_property
    def word_sketch(self) -> HCMS:
        """The HCMS of whole words, at epsilon/2."""
        return HCMS(self.epsilon / 2, self.m, self.hashes, self.max_length, self.seed)

    @cached_property
    def fragment_sketch(self) -> HCMS:
        """The HCMS of each offset's (tag, byte) fragments, at epsilon/2."""
        try:
            return HCMS(self.epsilon / 2, self.fragment_m, self.hashes, 3, self.seed)
        except ValueError as error:  # the word sketch checked the rest: this is m
            raise ValueError(f"fragment_{error}") from None

    @property
    def privacy_epsilon(self) -> float:
        return self.word_sketch.privacy_epsilon + self.fragment_sketch.privacy_epsilon

    @property
    def offsets(self) -> int:
        return int(self.max_length)

    def tags(self, values: Sequence[bytes]) -> npt.NDArray[np.int64]:
        """The one-byte tag of each word."""
        key = TAG_KEY + self.seed.to_bytes(8, "big")
        digest = b"".join(hashlib.blake2b(v, digest_size=1, key=key).digest() for v in values)
        return np.frombuffer(digest, dtype=np.uint8).astype(np.int64)

    @staticmethod
    def fragment_string(tag: int, byte: int) -> bytes:
        return FRAGMENT_PREFIX + bytes([tag, byte])

    @cached_property
    def fragment_table(self) -> npt.NDArray[np.int64]:
        """``hash_table`` of every fragment string, row 256 * tag + byte."""
        strings = [self.fragment_string(t, b) for t in range(256) for b in range(256)]
        return self.fragment_sketch.hash_table(strings)

    # ---- device side ---------------------------------------------------------------------

    @property
    def report_dtype(self) -> np.dtype[Any]:
        return np.dtype([("offset", np.int16), ("word", np.int64), ("fragment", np.int64)])

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        distinct, inverse = distinct_strings(values, self.max_length, self.name)
        n = inverse.size
        out = np.zeros(n, dtype=self.report_dtype)
        if not n:
            return out
        word = self.word_sketch
        out["word"] = word.perturb_buckets(*word.encoded_buckets(distinct, inverse, rng), rng)
        offsets = uniform_below_32(rng, self.offsets, n) if self.offsets > 1 else np.zeros(n, int)
        padded = np.zeros((len(distinct), self.max_length), dtype=np.int64)
        for i, value in enumerate(distinct):
            padded[i, : len(value)] = np.frombuffer(value, dtype=np.uint8)
        fragment_rows = 256 * self.tags(distinct)[inverse] + padded[inverse, offsets]
        sketch = self.fragment_sketch
        rows = uniform_below_32(rng, self.hashes, n) if self.hashes > 1 else np.zeros(n, int)
        buckets = self.fragment_table[fragment_rows, rows]
        out["offset"] = offsets
        out["fragment"] = sketch.perturb_buckets(rows, buckets, rng)
        return out

    # ---- wire ------------------------------------------------------------------------------

    def _check(self, reports: Reports) -> Reports:
        array = np.asarray(reports)
        if array.dtype != self.report_dtype or array.ndim != 1:
            raise ValueError(f"reports must be a 1-D array of dtype {self.report_dtype}")
        return array

    def to_wire(self, reports: Reports) -> list[Any]:
        array = self._check(reports)
        return [
            {"offset": int(o), "word": int(w), "fragment": int(f)}
            for o, w, f in zip(array["offset"], array["word"], array["fragment"], strict=True)
        ]

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        good: list[tuple[int, int, int]] = []
        errors: list[WireFormatError] = []
        limits = {
            "offset": self.offsets,
            "word": self.word_sketch.outputs,
            "fragment": self.fragment_sketch.outputs,
        }
        for index, payload in enumerate(payloads):
            if not isinstance(payload, dict) or set(payload) != set(limits):
                got = sorted(map(str, payload)) if isinstance(payload, dict) else None
                errors.append(
                    WireFormatError(
                        index,
                        "payload must be an object with exactly offset, word and fragment; got "
                        + (f"fields {got}" if got is not None else type(payload).__name__),
                    )
                )
                continue
            bad = next(
                (
                    f"{field} must be an integer in [0, {high}); got {payload[field]!r}"
                    for field, high in limits.items()
                    if not is_plain_int(payload[field]) or not 0 <= int(payload[field]) < high
                ),
                None,
            )
            if bad:
                errors.append(WireFormatError(index, bad))
            else:
                good.append(
                    (int(payload["offset"]), int(payload["word"]), int(payload["fragment"]))
                )
        out = np.zeros(len(good), dtype=self.report_dtype)
        if good:
            columns = np.asarray(good, dtype=np.int64)
            out["offset"], out["word"], out["fragment"] = columns.T
        return out, errors

    # ---- server side ---------------------------------------------------------------------

    @property
    def _word_cells(self) -> int:
        return self.word_sketch.outputs

    def empty_statistic(self) -> AggregateStatistic:
        size = self._word_cells + self.offsets * self.fragment_sketch.outputs
        return AggregateStatistic(np.zeros(size, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """One integer vector: the word sketch's counts, then each offset's fragment counts."""
        array = self._check(reports)
        word = self.word_sketch.aggregate(array["word"]).counts.ravel()
        cells = self.fragment_sketch.outputs
        keys = array["offset"].astype(np.int64) * cells + array["fragment"]
        if keys.size and (array["fragment"].min() < 0 or array["fragment"].max() >= cells):
            raise ValueError(f"fragment reports must be in [0, {cells})")
        fragments = np.bincount(keys, minlength=self.offsets * cells)
        return AggregateStatistic(np.concatenate([word, fragments]).astype(np.int64), array.size)

    def split(
        self, statistic: AggregateStatistic
    ) -> tuple[AggregateStatistic, list[AggregateStatistic]]:
        """The word sketch's statistic and each offset's fragment statistic."""
        counts = np.asarray(statistic.counts)
        word_shape = self.word_sketch.empty_statistic().counts.shape
        word = AggregateStatistic(counts[: self._word_cells].reshape(word_shape), statistic.n)
        shape = self.fragment_sketch.empty_statistic().counts.shape
        blocks = counts[self._word_cells :].reshape(self.offsets, -1)
        return word, [AggregateStatistic(b.reshape(shape), int(b.sum())) for b in blocks]
