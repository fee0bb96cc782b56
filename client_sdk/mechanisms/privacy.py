"""What one report of a mechanism reveals, as data: privacy events.

Every mechanism answers ``privacy_event()`` with one of these small frozen descriptions, in the
style of dp_accounting's ``dp_event.py`` (Google's differential-privacy library). An event says
*what was released* and nothing about how it is accounted: the accounting
(``analysis.accounting``) turns events into privacy loss distributions and dispatches on the
event, never on a mechanism's name or class. See docs/math/accounting.md.

>>> round(RandomizedResponseEvent(epsilon=1.0, k=4).p, 4)   # keep the value: e / (e + 3)
0.4754
>>> PermanentResponseEvent(epsilon_1=0.5, inner=PureEvent(2.0)).inner.epsilon
2.0

The rules of ``dp_event.py`` hold here too, so that an accountant never silently gives a wrong
answer: an event or a field is never removed, a new field is optional, the meaning of an event
never changes (a new class is added instead), and an accountant that does not know an event
refuses it with an error rather than guessing.

Every event describes one report under the local-DP neighbouring relation "the device's value
changes", for the *implemented* probabilities (after rounding to the sampler's grid).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import (
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_probability,
)

__all__ = [
    "ApproximateEvent",
    "ChannelEvent",
    "ChannelSource",
    "GaussianEvent",
    "PermanentResponseEvent",
    "PrivacyEvent",
    "PureEvent",
    "RandomizedResponseEvent",
    "UnaryEncodingEvent",
]


@dataclasses.dataclass(frozen=True)
class PrivacyEvent:
    """The base of every event (it describes nothing by itself)."""


@dataclasses.dataclass(frozen=True)
class PureEvent(PrivacyEvent):
    """A report known only to be ``epsilon``-DP (its worst case is binary randomized response,
    Kairouz, Oh, Viswanath, ICML 2015)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))


@dataclasses.dataclass(frozen=True)
class ApproximateEvent(PrivacyEvent):
    """A report known only to be (``epsilon``, ``delta``)-DP (worst case: Kairouz, Oh,
    Viswanath 2015, Thm 2.4)."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, allow_zero=True))
        object.__setattr__(self, "delta", check_delta(self.delta))


@dataclasses.dataclass(frozen=True)
class RandomizedResponseEvent(PrivacyEvent):
    """k-ary randomized response: the value is kept with probability p = e^eps / (e^eps + k - 1)
    and each other value is sent with q = 1 / (e^eps + k - 1) (Warner 1965; Wang et al., USENIX
    Security 2017). docs/math/randomized-response.md."""

    epsilon: float
    k: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2))

    @property
    def p(self) -> float:
        """P[report = the value]."""
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        """P[report = one given other value]."""
        return 1.0 / (math.exp(self.epsilon) + self.k - 1)


@dataclasses.dataclass(frozen=True)
class UnaryEncodingEvent(PrivacyEvent):
    """Unary encoding: bit v of the report is 1 with probability ``p`` when the value is v and
    ``q`` otherwise, bits independent (SUE, OUE; Wang et al. 2017). Two values differ in two bits.
    docs/math/unary-encoding.md."""

    p: float
    q: float

    def __post_init__(self) -> None:
        p = check_probability(self.p, "p")
        q = check_probability(self.q, "q")
        if not q < p:
            raise ValueError(f"unary encoding needs q < p; got p={self.p!r}, q={self.q!r}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)


@dataclasses.dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """The Gaussian mechanism: noise of standard deviation ``noise_multiplier`` times the L2
    sensitivity (the diameter of the input set, in local DP). Its privacy is mu-GDP with
    mu = 1 / noise_multiplier (Dong, Roth, Su, JRSS-B 2022). ``claim``, when given, is the
    (epsilon, delta) the mechanism states, for the classical composition bounds.
    docs/math/numeric.md."""

    noise_multiplier: float
    claim: ApproximateEvent | None = None

    def __post_init__(self) -> None:
        value = check_positive(self.noise_multiplier, "noise_multiplier")
        object.__setattr__(self, "noise_multiplier", value)
        if self.claim is not None and not isinstance(self.claim, ApproximateEvent):
            raise ValueError(f"claim must be an ApproximateEvent or None; got {self.claim!r}")


@runtime_checkable
class ChannelSource(Protocol):
    """Something that enumerates its exact channel: one ``(inputs, outputs)`` row-stochastic
    matrix per value of its public randomness (``Mechanism.channel_matrices``)."""

    @property
    def name(self) -> str:
        """The mechanism's name, for labels."""
        ...

    def channel_matrices(self, *args: Any, **kwargs: Any) -> Iterable[npt.NDArray[np.float64]]:
        """The matrices; may raise ValueError when too large to enumerate."""
        ...


@dataclasses.dataclass(frozen=True)
class ChannelEvent(PrivacyEvent):
    """A report through an exactly known channel: ``source.channel_matrices()`` (with
    ``stage=stage`` when a stage is named, as RAPPOR's ``"permanent"``). ``fallback`` describes
    the report when the channel is too large to enumerate (its claim)."""

    source: ChannelSource
    fallback: PrivacyEvent
    stage: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, ChannelSource):
            raise ValueError(f"source must enumerate its channel; got {self.source!r}")
        if not isinstance(self.fallback, PrivacyEvent) or isinstance(self.fallback, ChannelEvent):
            raise ValueError(f"fallback must be a claim event; got {self.fallback!r}")


@dataclasses.dataclass(frozen=True)
class PermanentResponseEvent(PrivacyEvent):
    """Memoized reports (Erlingsson, Pihur, Korolova, CCS 2014): every report of one value is a
    post-processing of one permanent response, described by ``inner`` (at epsilon_inf), so any
    number of reports of one value reveal at most what ``inner`` reveals; one report alone is
    ``epsilon_1``-DP. Distinct values get independent permanent responses.
    docs/math/memoization.md."""

    epsilon_1: float
    inner: PrivacyEvent

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon_1", check_epsilon(self.epsilon_1, "epsilon_1"))
        if not isinstance(self.inner, PrivacyEvent) or isinstance(
            self.inner, PermanentResponseEvent
        ):
            raise ValueError(f"inner must describe one permanent response; got {self.inner!r}")
