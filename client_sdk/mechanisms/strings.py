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
from client_sdk.mechanisms.longitudinal import LONGITUDINAL_FIELD
from client_sdk.mechanisms.memoization import (
    MAX_THRESHOLD,
    KeyedSource,
    check_keyed_source,
    largest_threshold,
)
from client_sdk.mechanisms.privacy import PermanentResponseEvent, PrivacyEvent
from client_sdk.randomness import WORD_SPAN, RandomSource, threshold_probability

__all__ = [
    "MemoizedStrings",
    "composed_flip",
    "distinct_strings",
    "flip_again_threshold",
    "memo_label",
]


def distinct_strings(
    values: Any, max_length: int, name: str, alphabet: str | None = None
) -> tuple[list[bytes], npt.NDArray[np.int64]]:
    """Distinct values as UTF-8 bytes (first-seen order) and the index of each value among them.

    ``values`` is a sequence of ``str``. A value of more than ``max_length`` bytes is refused
    with its position, its length and the limit, never its content. With ``alphabet`` (a
    campaign whose values are written in these characters: PEM's device alphabet),
    ``max_length`` counts characters, and a value with a character outside the alphabet is
    refused with its position and the character's offset, never the character. Each distinct
    string is checked and encoded once.
    """
    allowed = None if alphabet is None else frozenset(alphabet)
    if isinstance(values, (str, bytes)):
        values = [values]
    elif isinstance(values, np.ndarray):
        values = values.tolist()
    elif not isinstance(values, Sequence):
        raise ValueError(f"values must be a sequence of strings; got {type(values).__name__}")

    def first_index(test: Any) -> int:
        return next(i for i, v in enumerate(values) if test(v))

    try:  # dict.fromkeys and map run in C: no Python frame per value
        position = {v: i for i, v in enumerate(dict.fromkeys(values))}
        inverse = np.fromiter(map(position.__getitem__, values), dtype=np.int64, count=len(values))
    except TypeError:  # an unhashable value: certainly not a string
        index = first_index(lambda v: not isinstance(v, str))
        raise ValueError(
            f"{name}: values[{index}] must be a string; got {type(values[index]).__name__}"
        ) from None
    encoded: list[bytes] = []
    for value in position:
        if not isinstance(value, str):
            index = first_index(lambda v, bad=value: v is bad or not isinstance(v, str))
            raise ValueError(
                f"{name}: values[{index}] must be a string; got {type(values[index]).__name__}"
            )
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the message would show the character
            index = first_index(lambda v, bad=value: isinstance(v, str) and v == bad)
            raise ValueError(
                f"{name}: values[{index}] is not valid Unicode (it has a lone surrogate, which "
                "UTF-8 cannot encode)"
            ) from None
        if allowed is None and len(raw) > max_length:
            index = first_index(lambda v, long=value: isinstance(v, str) and v == long)
            raise ValueError(
                f"{name}: values[{index}] is {len(raw)} bytes in UTF-8, more than max_length="
                f"{max_length}"
            )
        if allowed is not None and len(value) > max_length:
            index = first_index(lambda v, long=value: isinstance(v, str) and v == long)
            raise ValueError(
                f"{name}: values[{index}] is {len(value)} characters, more than max_length="
                f"{max_length} (the campaign has an alphabet: max_length counts characters)"
            )
        if allowed is not None and not allowed.issuperset(value):
            index = first_index(lambda v, bad=value: isinstance(v, str) and v == bad)
            offset = next(j for j, c in enumerate(value) if c not in allowed)
            raise ValueError(
                f"{name}: values[{index}] has a character outside the campaign's alphabet (at "
                f"character {offset}; the alphabet has {len(allowed)} characters)"
            )
        encoded.append(raw)
    return encoded, inverse


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


class MemoizedStrings:
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

    def perturb(
        self,
        values: Any,
        *,
        rng: RandomSource | None = None,
        permanent: KeyedSource | None = None,
    ) -> Any:
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
