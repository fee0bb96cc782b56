"""SFP: Apple's sequence fragment puzzle, discovery of strings from a word sketch and fragments.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017; docs/math/heavy-hitters.md. A device holding the string w (at most
``max_length`` bytes of UTF-8, padded with zero bytes to ``max_length``) sends, in one report:

1. ``word``: an HCMS report (``client_sdk.mechanisms.sketch.HCMS``) of w at epsilon_word;
2. ``offset``: l uniform in [0, max_length), independent of w, in the clear;
3. ``fragment``: a Hadamard-response report (``client_sdk.mechanisms.hadamard.HR``) at
   epsilon_fragment of the fragment 256 * tag(w) + w_padded[l], where tag(w) is the first byte
   of BLAKE2b(w, key = TAG_KEY || seed): a frequency oracle over the 65,536 (tag, byte) pairs.

The budget: epsilon_fragment = ``fragment_share`` * epsilon and epsilon_word = epsilon -
epsilon_fragment (a fragment is estimated from the 1/max_length of the reports at its offset,
the word from all of them; the default share comes from the exact variances:
``resolved_share``). Privacy: the two reports use independent
randomness and the offset is independent of the value, so by basic composition a report is
(epsilon_word + epsilon_fragment) = epsilon-LDP; the tag travels only inside the randomized
fragment.

Why these two oracles (Apple's paper uses CMS/HCMS for both): the fragment domain is small and
known, so it needs no hashing, and Hadamard response estimates all 65,536 fragments of an offset
from its output histogram with one fast Walsh-Hadamard transform and a variance close to local
hashing's that falls with epsilon (a one-bit HCMS fragment's variance never falls below one per
report, and its hash collisions were what kept recall flat). The word sketch is one-bit HCMS of
width 65,536: its collision variance, n^2 sum f^2 / (m hashes), is then small beside the noise.
Both statistics are integer histograms that merge by addition, so the server decodes from the
merged statistic alone (``analysis.kinds.discovery.estimate.discover_sfp``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import statistics
from collections.abc import Sequence
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
)
from client_sdk.mechanisms.hadamard import HR
from client_sdk.mechanisms.memoization import KeyedSource
from client_sdk.mechanisms.memoized_oracle import Memoized
from client_sdk.mechanisms.sketch import HCMS, MAX_SEED, MemoizedHCMS, device_choice
from client_sdk.mechanisms.strings import MemoizedStrings, distinct_strings
from client_sdk.randomness import RandomSource, uniform_below_32

__all__ = ["SFP", "TAG_KEY", "MemoizedSFP"]

TAG_KEY = b"ldp-telemetry/sfp-tag/v1"
MAX_LENGTH = 32
FRAGMENTS = 256 * 256
"""The fragment domain: (tag, byte) pairs, fragment = 256 * tag + byte."""
SHARES = tuple(round(0.5 + 0.05 * i, 2) for i in range(9))
"""The fragment shares ``resolved_share`` chooses among (0.5 to 0.9)."""
PREVIOUS_SHARE = 0.75
"""The share of earlier versions, kept unless the variances promise at least 10% better."""


@functools.lru_cache(maxsize=64)
def resolved_share(epsilon: float, offsets: int, m: int, hashes: int) -> float:
    """The share of epsilon the fragment gets when the config omits it (docs/math/heavy-hitters.md):
    of ``SHARES``, the one that minimizes the frequency a string needs to be found with
    probability 1/2 at the decoder's defaults (64 items, alpha 0.05), from the exact null
    variances per report, v_f of the Hadamard fragment oracle and v_w of the word sketch:
    max((z_keep + z_every) sqrt(offsets v_f), z_word sqrt(v_w)). z_keep = z_(1 - 128/65,536)
    (a fragment ranks among the 128 kept of its offset), z_every = z_((1/2)^(1/offsets)) (at
    every offset), z_word = z_(1 - 0.05/64) (the word test, Bonferroni over 64 candidates).
    These z's are approximate (normal quantiles for a selection), so the rule keeps
    ``PREVIOUS_SHARE`` unless the best share needs at least 10% less."""
    normal = statistics.NormalDist()
    z_fragment = normal.inv_cdf(1 - 128 / FRAGMENTS) + normal.inv_cdf(0.5 ** (1 / offsets))
    z_word = normal.inv_cdf(1 - 0.05 / 64)

    def needed(share: float) -> float:
        fragment = HR(share * epsilon, FRAGMENTS).variance(1, np.zeros(FRAGMENTS))[0]
        word = HCMS((1 - share) * epsilon, m, hashes, 1).count_variance(
            1, np.zeros(1), np.zeros(1)
        )[0]
        return max(z_fragment * math.sqrt(offsets * fragment), z_word * math.sqrt(word))

    best = min(SHARES, key=needed)
    return PREVIOUS_SHARE if needed(PREVIOUS_SHARE) <= 1.1 * needed(best) else best


@dataclasses.dataclass(frozen=True)
class SFP(Mechanism):
    """The sequence fragment puzzle (module docstring).

    Config fields: ``epsilon``; ``max_length`` bytes (1 to 32); ``m`` and ``hashes`` of the word
    sketch (default 65536 and 16); ``fragment_share`` the share of epsilon the fragment gets
    (in (0, 1); resolved by ``resolved_share`` when omitted, then kept: 0.75 at epsilon 2 and
    4, 0.55 at 8 for ``max_length`` 8); ``fragment_blocks`` the fragment oracle's HR blocks
    (resolved for epsilon_fragment when omitted, then kept); ``seed`` of the hash family and the
    tag.
    """

    epsilon: float
    max_length: int
    m: int = 1 << 16
    hashes: int = 16
    fragment_share: float | None = None
    fragment_blocks: int | None = None
    seed: int = 0

    name: ClassVar[str] = "sfp"
    value_kind: ClassVar[Literal["category", "number", "string"]] = "string"
    estimate_kind: ClassVar[str] = "discovery"
    discovery: ClassVar[str | None] = "fragments"
    tests_candidates: ClassVar[bool] = True

    @staticmethod
    def longitudinal_variant() -> type[MemoizedSFP]:
        """The class of this mechanism under ``"longitudinal"``."""
        return MemoizedSFP

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        length = check_int(self.max_length, "max_length", minimum=1, maximum=MAX_LENGTH)
        object.__setattr__(self, "max_length", length)
        seed = check_int(self.seed, "seed", minimum=0, maximum=MAX_SEED - 1)
        object.__setattr__(self, "seed", seed)
        share = self.fragment_share
        if share is None:
            sketch = HCMS(self.epsilon, self.m, self.hashes, length, seed)  # names a bad m
            share = resolved_share(self.epsilon, length, sketch.m, sketch.hashes)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:
            raise ValueError(f"fragment_share must be a number in (0, 1); got {share!r}")
        object.__setattr__(self, "fragment_share", float(share))
        self.word_sketch  # noqa: B018 -- validates m and hashes, naming the field
        try:
            blocks = HR(self.epsilon_fragment, FRAGMENTS, blocks=self.fragment_blocks).blocks
        except ValueError as error:
            raise ValueError(f"fragment_{error}") from None
        object.__setattr__(self, "fragment_blocks", blocks)

    @property
    def epsilon_fragment(self) -> float:
        return self.share * self.epsilon

    @property
    def share(self) -> float:
        """``fragment_share`` (resolved in ``__post_init__``)."""
        assert self.fragment_share is not None
        return self.fragment_share

    @property
    def epsilon_word(self) -> float:
        return self.epsilon - self.epsilon_fragment

    @cached_property
    def word_sketch(self) -> HCMS:
        """The HCMS of whole words, at epsilon_word."""
        return HCMS(self.epsilon_word, self.m, self.hashes, self.max_length, self.seed)

    @cached_property
    def fragment_oracle(self) -> FrequencyOracle:
        """Hadamard response over the (tag, byte) fragments, at epsilon_fragment."""
        return HR(self.epsilon_fragment, FRAGMENTS, blocks=self.fragment_blocks)

    @property
    def privacy_epsilon(self) -> float:
        return self.word_sketch.privacy_epsilon + self.fragment_oracle.privacy_epsilon

    @property
    def offsets(self) -> int:
        return int(self.max_length)

    def tags(self, values: Sequence[bytes]) -> npt.NDArray[np.int64]:
        """The one-byte tag of each word."""
        key = TAG_KEY + self.seed.to_bytes(8, "big")
        digest = b"".join(hashlib.blake2b(v, digest_size=1, key=key).digest() for v in values)
        return np.frombuffer(digest, dtype=np.uint8).astype(np.int64)

    def fragments(
        self, distinct: Sequence[bytes], offsets: npt.NDArray[np.int64], inverse: Any
    ) -> npt.NDArray[np.int64]:
        """256 * tag + byte at ``offsets`` of the words ``distinct[inverse]``."""
        padded = np.frombuffer(
            b"".join(value.ljust(self.max_length, b"\x00") for value in distinct), dtype=np.uint8
        ).reshape(len(distinct), self.max_length)
        byte = padded[inverse, offsets].astype(np.int64)
        return np.asarray(256 * self.tags(distinct)[inverse] + byte)

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
        out["offset"] = offsets
        out["fragment"] = self.fragment_oracle.perturb(
            self.fragments(distinct, offsets, inverse), rng=rng
        )
        return out

    # ---- wire ------------------------------------------------------------------------------

    def _check(self, reports: Reports) -> Reports:
        array = np.asarray(reports)
        if array.dtype != self.report_dtype or array.ndim != 1:
            raise ValueError(f"reports must be a 1-D array of dtype {self.report_dtype}")
        return array

    @property
    def fragment_outputs(self) -> int:
        return int(self.fragment_oracle.empty_statistic().counts.size)

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return {
            "offset": widest_int(0, self.offsets),
            "word": widest_int(0, self.word_sketch.outputs),
            "fragment": widest_int(0, self.fragment_outputs),
        }

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
            "fragment": self.fragment_outputs,
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
        size = self._word_cells + self.offsets * self.fragment_outputs
        return AggregateStatistic(np.zeros(size, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """One integer vector: the word sketch's counts, then each offset's fragment histogram."""
        array = self._check(reports)
        word = self.word_sketch.aggregate(array["word"]).counts.ravel()
        cells = self.fragment_outputs
        if array.size and (array["fragment"].min() < 0 or array["fragment"].max() >= cells):
            raise ValueError(f"fragment reports must be in [0, {cells})")
        if array.size and (array["offset"].min() < 0 or array["offset"].max() >= self.offsets):
            raise ValueError(f"offsets must be in [0, {self.offsets})")
        keys = array["offset"].astype(np.int64) * cells + array["fragment"]
        fragments = np.bincount(keys, minlength=self.offsets * cells)
        return AggregateStatistic(np.concatenate([word, fragments]).astype(np.int64), array.size)

    def split(
        self, statistic: AggregateStatistic
    ) -> tuple[AggregateStatistic, list[AggregateStatistic]]:
        """The word sketch's statistic and each offset's fragment statistic."""
        counts = np.asarray(statistic.counts)
        word_shape = self.word_sketch.empty_statistic().counts.shape
        word = AggregateStatistic(counts[: self._word_cells].reshape(word_shape), statistic.n)
        blocks = counts[self._word_cells :].reshape(self.offsets, -1)
        return word, [AggregateStatistic(b.copy(), int(b.sum())) for b in blocks]

    def fragment_counts(self, fragment: AggregateStatistic) -> FloatArray:
        """The estimated count of every (tag, byte) fragment at one offset (row 256 tag + byte)."""
        if not fragment.n:
            return np.zeros(FRAGMENTS)
        return np.asarray(
            self.fragment_oracle.estimate_frequencies(fragment) * fragment.n, dtype=np.float64
        )

    def fragment_variance(self, fragment: AggregateStatistic, counts: FloatArray) -> FloatArray:
        """Var of ``fragment_counts`` at the counts given (the oracle's exact variance)."""
        n = fragment.n
        f = np.clip(np.asarray(counts, dtype=np.float64) / max(n, 1), 0.0, 1.0)
        return np.asarray(self.fragment_oracle.variance(n, f) * n * n, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class MemoizedSFP(MemoizedStrings, SFP):
    """SFP under ``"longitudinal"`` (client_sdk/mechanisms/strings.py).

    epsilon and epsilon_permanent are split by ``fragment_share`` alike. The device's offset is
    fixed by its keyed source; the word part is memoized HCMS (sketch.py: the device's cell, the
    sign memoized per string) and the fragment part memoized Hadamard response (memoized_oracle.py:
    the PRR memoized per fragment value, the mixture chain). A report is
    (epsilon_1 word + epsilon_1 fragment) <= epsilon-LDP; all reports of one string reveal at most
    the two PRRs: epsilon_inf = epsilon_permanent.
    """

    epsilon_permanent: float = dataclasses.field(kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_permanent()

    @cached_property
    def permanent(self) -> SFP:
        return SFP(
            self.epsilon_permanent,
            self.max_length,
            m=self.m,
            hashes=self.hashes,
            fragment_share=self.fragment_share,
            fragment_blocks=self.fragment_blocks,
            seed=self.seed,
        )

    @cached_property
    def word_sketch(self) -> MemoizedHCMS:
        return MemoizedHCMS(
            self.epsilon_word,
            self.m,
            self.hashes,
            self.max_length,
            self.seed,
            epsilon_permanent=self.epsilon_permanent - self.share * self.epsilon_permanent,
        )

    @cached_property
    def fragment_oracle(self) -> Memoized:
        inner = HR(self.share * self.epsilon_permanent, FRAGMENTS, blocks=self.fragment_blocks)
        return Memoized(inner=inner, epsilon=self.epsilon_fragment)

    @property
    def epsilon_one(self) -> float:
        return self.word_sketch.epsilon_one + self.fragment_oracle.epsilon_one

    def permanent_reports(self, distinct: Sequence[bytes], keys: KeyedSource) -> Reports:
        out = np.zeros(len(distinct), dtype=self.report_dtype)
        if not distinct:
            return out
        offset = device_choice(keys, "sfp:offset", self.offsets)
        word = self.word_sketch
        row, column = word.cell(WordKeys(keys))
        buckets = word.hash_table(distinct)[:, row]
        out["word"] = word.permanent_of_buckets(buckets, (row, column), distinct, WordKeys(keys))
        out["offset"] = offset
        fragments = self.fragments(
            distinct, np.full(len(distinct), offset), np.arange(len(distinct))
        )
        out["fragment"] = self.fragment_oracle.permanent_responses(fragments, permanent=keys)
        return out

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        out = np.array(permanent, copy=True)
        out["word"] = self.word_sketch.instantaneous(out["word"], rng)
        out["fragment"] = self.fragment_oracle._chain.instantaneous(out["fragment"], rng)
        return out

    @property
    def resend_probability(self) -> float:
        return self.word_sketch.resend_probability * self.fragment_oracle.resend_probability

    @property
    def linkability(self) -> str:
        return (
            "the offset is the device's for the campaign; word: "
            + self.word_sketch.linkability
            + "; fragment: "
            + self.fragment_oracle.linkability
        )


@dataclasses.dataclass(frozen=True)
class WordKeys:
    """The keyed source with every label under ``sfp/word/``: the word sketch's draws stay
    apart from the fragment's and from a plain memoized HCMS campaign's."""

    keys: KeyedSource

    @property
    def scope(self) -> str:
        return self.keys.scope

    @property
    def reference_secret(self) -> bytes:
        return self.keys.reference_secret

    def source(self, label: str, index: int) -> RandomSource:
        return self.keys.source("sfp/word/" + label, index)

    def key(self, label: str, index: int) -> str:
        return self.keys.key("sfp/word/" + label, index)
