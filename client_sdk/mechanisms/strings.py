"""Strings as values: their validation, and what the string mechanisms share when memoized.

A string mechanism (``cms``, ``hcms``, ``pem``, ``sfp``) takes UTF-8 strings of at most
``max_length`` bytes (characters, for a PEM campaign with an ``alphabet``;
:func:`distinct_strings`). Under ``"longitudinal"`` each has a memoized variant
(docs/math/heavy-hitters.md, "Memoization"): the permanent response (PRR) of a string is
the plain mechanism at ``epsilon_permanent`` run on the keyed source's stream for that string
(label :func:`memo_label`: the string's bytes in hex, never stored), and each report re-randomizes
the PRR's randomized part with fresh noise (the instantaneous step). What a device picks
independently of its values (a sketch row and column, a PEM level, an SFP offset) comes from the
keyed source once per device and campaign, so it is the same for all its values. A report is
then epsilon-LDP (epsilon_1, exactly, from the implemented probabilities), and any number of
reports of one string reveal at most its PRR (epsilon_inf = epsilon_permanent): the ledger charges
epsilon_inf once per distinct string (``client_sdk.budget``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon
from client_sdk.mechanisms.memoization import (
    MAX_THRESHOLD,
    DeviceKeyed,
    KeyedSource,
    check_keyed_source,
    largest_threshold,
)
from client_sdk.mechanisms.memoized_oracle import LONGITUDINAL_FIELD
from client_sdk.mechanisms.privacy import PermanentResponseEvent, PrivacyEvent
from client_sdk.randomness import WORD_SPAN, RandomSource, threshold_probability

__all__ = [
    "RESERVED",
    "MemoizedStrings",
    "composed_flip",
    "count_reserved",
    "distinct_strings",
    "flip_again_threshold",
    "memo_label",
]


RESERVED = b"\xff"
"""The reserved symbol: what a string mechanism randomizes in place of a value it cannot carry
(more than ``max_length``, a character outside the campaign's alphabet, a lone surrogate). A
byte no UTF-8 text holds, so no value is ever confused with it; it is randomized like any other
value, so a report's distribution depends on the value only through the mechanism (a refused
value would send nothing, and the missing report would tell a collector expecting one that the
value was out of range). PEM writes it as its own bit string (``PEM.value_bits``)."""


def _representable(value: str, max_length: int, allowed: frozenset[str] | None) -> bytes | None:
    """The UTF-8 bytes of a string the mechanism can carry, or ``None`` (:data:`RESERVED`)."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if allowed is None:
        return raw if len(raw) <= max_length else None
    return raw if len(value) <= max_length and allowed.issuperset(value) else None


def distinct_strings(
    values: Any, max_length: int, name: str, alphabet: str | None = None
) -> tuple[list[bytes], npt.NDArray[np.int64]]:
    """Distinct values as UTF-8 bytes (first-seen order) and the index of each value among them.

    ``values`` is a sequence of ``str`` (anything else is refused with its position and type).
    A value the mechanism cannot carry (more than ``max_length`` bytes; with ``alphabet``, a
    campaign whose values are written in these characters, PEM's device alphabet, more than
    ``max_length`` characters or a character outside it; a lone surrogate) is
    :data:`RESERVED` instead: all of them are the one reserved symbol. Each distinct string is
    checked and encoded once.
    """
    allowed = None if alphabet is None else frozenset(alphabet)
    values = _string_sequence(values, name)
    try:  # dict.fromkeys and map run in C: no Python frame per value
        position = {v: i for i, v in enumerate(dict.fromkeys(values))}
        inverse = np.fromiter(map(position.__getitem__, values), dtype=np.int64, count=len(values))
    except TypeError:  # an unhashable value: certainly not a string
        _refuse_non_string(values, name)
        raise
    encoded: list[bytes] = []
    index: dict[bytes, int] = {}
    remap = np.empty(len(position), dtype=np.int64)
    for slot, value in enumerate(position):
        if not isinstance(value, str):
            _refuse_non_string(values, name)
        raw = _representable(value, max_length, allowed)
        raw = RESERVED if raw is None else raw
        remap[slot] = index.setdefault(raw, len(encoded))
        if remap[slot] == len(encoded):
            encoded.append(raw)
    return encoded, remap[inverse]


def count_reserved(values: Any, max_length: int, alphabet: str | None = None) -> int:
    """How many of ``values`` (strings) are sent as :data:`RESERVED` (the device's status counts
    them; the values themselves are never kept)."""
    allowed = None if alphabet is None else frozenset(alphabet)
    values = _string_sequence(values, "values")
    bad = {
        v
        for v in set(values)
        if isinstance(v, str) and _representable(v, max_length, allowed) is None
    }
    return sum(1 for v in values if v in bad) if bad else 0


def _string_sequence(values: Any, name: str) -> Sequence[Any]:
    if isinstance(values, (str, bytes)):
        return [values]
    if isinstance(values, np.ndarray):
        return list(values.tolist())
    if not isinstance(values, Sequence):
        raise ValueError(f"values must be a sequence of strings; got {type(values).__name__}")
    return values


def _refuse_non_string(values: Sequence[Any], name: str) -> None:
    """Raise naming the first value that is not a string (its position and type only)."""
    index = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
    if index is not None:
        raise ValueError(
            f"{name}: values[{index}] must be a string; got {type(values[index]).__name__}"
        )


def memo_label(namespace: str, raw: bytes) -> str:
    """The keyed-source label of a string's memoized draw: ``namespace`` then its bytes in hex
    (unambiguous; it only ever enters the HMAC)."""
    return f"{namespace}string:{raw.hex()}"


def composed_flip(permanent_flip: Fraction, keep: Fraction) -> Fraction:
    """P[a sign differs from the truth] after a flip with ``permanent_flip`` and then another
    flip unless kept (probability ``keep``): q' = q1 keep + (1 - q1)(1 - keep)."""
    return permanent_flip * keep + (1 - permanent_flip) * (1 - keep)


def flip_again_threshold(permanent_flip: Fraction, target: Fraction, power: int) -> int:
    """The instantaneous step's keep threshold T: the largest on the 2**-64 grid such that one
    report, whose ``power`` signs each differ from the truth with probability q' (two inputs
    differ in ``power`` signs), has worst ratio ((1 - q')/q')**power <= ``target``."""

    def ratio(threshold: int) -> Fraction:
        q = composed_flip(permanent_flip, threshold_probability(threshold))
        return ((1 - q) / q) ** power

    return largest_threshold(ratio, WORD_SPAN // 2, MAX_THRESHOLD, target)


class MemoizedStrings(DeviceKeyed):
    """The memoized variant of a string mechanism (module docstring); a mixin placed before the
    plain mechanism's class, whose dataclass adds the field ``epsilon_permanent``.

    Subclasses give ``permanent`` (the plain mechanism at epsilon_permanent),
    ``permanent_reports`` (the PRR of distinct strings from a keyed source), ``instantaneous``
    (fresh noise on PRRs), ``epsilon_one`` and the linkability figures.
    """

    name: ClassVar[str]
    epsilon: float
    epsilon_permanent: float
    max_length: int

    memoized: ClassVar[bool] = True

    @property
    def _alphabet(self) -> str | None:
        """The campaign's alphabet, for a mechanism that has one (PEM's ``alphabet``)."""
        alphabet: str | None = getattr(self, "alphabet", None)
        return alphabet

    deterministic_pseudonym: ClassVar[bool] = False

    def _check_permanent(self) -> None:
        permanent = check_epsilon(self.epsilon_permanent, "longitudinal.epsilon_permanent")
        object.__setattr__(self, "epsilon_permanent", permanent)
        if permanent < self.epsilon:
            raise ValueError(
                f"longitudinal.epsilon_permanent must be >= epsilon (one report can never reveal "
                f"more than all reports); got {permanent!r} < {self.epsilon!r}"
            )

    # ---- what subclasses give ----------------------------------------------------------------

    @property
    def permanent(self) -> Any:
        raise NotImplementedError

    def permanent_reports(self, distinct: Sequence[bytes], keys: KeyedSource) -> Any:
        raise NotImplementedError

    def instantaneous(self, permanent: Any, rng: RandomSource | None) -> Any:
        raise NotImplementedError

    @property
    def epsilon_one(self) -> float:
        raise NotImplementedError

    @property
    def resend_probability(self) -> float:
        raise NotImplementedError

    @property
    def linkability(self) -> str:
        raise NotImplementedError

    # ---- the memoizing protocol --------------------------------------------------------------

    @property
    def epsilon_inf(self) -> float:
        """What unlimited reports of one string reveal: its PRR's guarantee."""
        return float(self.permanent.privacy_epsilon)

    @property
    def privacy_epsilon(self) -> float:
        return self.epsilon

    def privacy_event(self) -> PrivacyEvent:
        """One report is epsilon_1-DP; all reports of one string share its PRR."""
        return PermanentResponseEvent(self.epsilon, self.permanent.privacy_event())

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]:
        """The ledger's key of each string's PRR (a keyed hash: not the string)."""
        keys = check_keyed_source(permanent, self.name)
        distinct, inverse = distinct_strings(values, self.max_length, self.name, self._alphabet)
        named = [keys.key(memo_label("", raw), 0) for raw in distinct]
        return [named[i] for i in inverse.tolist()]

    def _perturb(self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None) -> Any:
        """One report per string: its PRR under ``permanent`` (required: a memoized mechanism
        never falls back to unmemoized reports), then fresh noise from ``rng``."""
        keys = check_keyed_source(permanent, self.name)
        distinct, inverse = distinct_strings(values, self.max_length, self.name, self._alphabet)
        return self.instantaneous(self.permanent_reports(distinct, keys)[inverse], rng)

    def permanent_responses(self, values: Any, *, permanent: KeyedSource) -> Any:
        """The PRR of each string, recomputed from the keyed source (same inputs, same output)."""
        keys = check_keyed_source(permanent, self.name)
        distinct, inverse = distinct_strings(values, self.max_length, self.name, self._alphabet)
        return self.permanent_reports(distinct, keys)[inverse]

    def perturb_independent_devices(self, values: Any, *, rng: RandomSource | None = None) -> Any:
        """Each string as the first report of its own new device (simulations and tests): the
        PRR drawn from ``rng`` (the plain mechanism at epsilon_permanent), then fresh noise."""
        return self.instantaneous(self.permanent.perturb(values, rng=rng), rng)

    def permanent_channel_matrices(self) -> Any:
        """The permanent step alone (its worst ratio is at most e^epsilon_permanent)."""
        return self.permanent.channel_matrices()

    def to_config(self) -> dict[str, Any]:
        """The plain config at the one-report epsilon, with ``"longitudinal"``."""
        config: dict[str, Any] = super().to_config()  # type: ignore[misc]
        permanent = config.pop("epsilon_permanent")
        config[LONGITUDINAL_FIELD] = {"epsilon_permanent": permanent}
        return config
