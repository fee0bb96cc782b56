"""The memoizing protocol: permanent responses from an injected keyed source, and the
instantaneous step that randomizes a permanent response again for each report.

A mechanism with memoized (permanent) responses (RAPPOR, dBitFlip, 1BitMean, any frequency oracle
under ``"longitudinal"``) never sees where its deterministic randomness comes from: the device
hands ``perturb`` a :class:`KeyedSource` (``client_sdk.secrets_store.DeviceKeys`` on a device,
derived from the device secret by HMAC-SHA256), and the mechanism asks it for the word stream of
each memoized draw by a label and an index. The same source always gives the same stream, so the
same value always gets the same permanent response; the ledger's name for the draw comes from the
same source (:meth:`KeyedSource.key`), so it reveals neither the value nor the response.

The instantaneous step of the longitudinal wrapper is a :class:`Chain`. Each frequency oracle
builds its own (``FrequencyOracle.memoization_chain``): randomized response over the permanent
value (grr.py), over the hashed bucket (local_hashing.py), a per-bit flip (unary.py), or the
:class:`MixtureChain` that fits any oracle. docs/math/memoization.md has the mathematics.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli,
    threshold_probability,
    uniform_below,
)

# Spelled here, not imported from base.py (which imports this module): no import circle.
Reports = npt.NDArray[Any]
FloatArray = npt.NDArray[np.float64]


class MemoizedOracle(Protocol):
    """What a chain reads of the frequency oracle it memoizes (``FrequencyOracle`` has it)."""

    @property
    def k(self) -> int: ...

    @property
    def privacy_epsilon(self) -> float: ...

    @property
    def p_star(self) -> float: ...

    @property
    def q_star(self) -> float: ...

    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports: ...

    def mixture_column_profile(self) -> tuple[Fraction, Fraction, bool]: ...


__all__ = [
    "MAX_THRESHOLD",
    "Chain",
    "DeviceKeyed",
    "KeyedSource",
    "MemoizedOracle",
    "Memoizing",
    "MixtureChain",
    "generic_column_profile",
    "is_memoized",
]

MAX_THRESHOLD = WORD_SPAN - 1
"""The largest keep threshold of an instantaneous step: keep with probability 1 - 2**-64."""


@runtime_checkable
class KeyedSource(Protocol):
    """Deterministic randomness for memoized draws, keyed by a label and an index.

    ``source(label, index)`` is the word stream of one memoized draw (the same every time);
    ``key(label, index)`` the ledger's name for it (a keyed hash: not the value, not the
    response). ``scope`` names what the draws belong to (the campaign configuration).
    ``reference_secret`` is the raw key, for an encoder whose derivation a reference
    implementation fixes (RAPPOR's: HMAC under the client secret, Erlingsson et al. 2014); every
    other mechanism uses ``source``.
    """

    @property
    def scope(self) -> str: ...

    @property
    def reference_secret(self) -> bytes: ...

    def source(self, label: str, index: int) -> RandomSource: ...

    def key(self, label: str, index: int) -> str: ...


@runtime_checkable
class Memoizing(Protocol):
    """What the device needs to know about a mechanism with memoized (permanent) responses.

    ``memoized`` says whether ``perturb`` needs ``permanent=`` (a :class:`KeyedSource`);
    ``epsilon_inf`` is what unlimited reports of one distinct value reveal (the ledger charges it
    once per memo key); ``memo_keys`` names, for the ledger, the distinct memoized draw each value
    uses. ``perturb(values, *, permanent, rng=None)`` gives one report per value.

    Each memoized mechanism also states what an observer can link across its reports:
    ``linkability`` (a sentence with the implemented figures) and ``deterministic_pseudonym``
    (True when every report of a value carries the same public part; the app's
    ``PrivacyPolicy`` then refuses it unless allowed). docs/math/memoization.md, "What an
    observer can link".
    """

    @property
    def memoized(self) -> bool: ...

    @property
    def epsilon_inf(self) -> float: ...

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]: ...


class DeviceKeyed(abc.ABC):
    """A mechanism whose reports may depend on the device's keyed source: memoized responses, or
    a choice made once per device and campaign (PEM's level, a hierarchy's level, the sampled
    table of ``multi`` or coefficient of ``fourier``). The one declaration of its ``perturb``;
    each mechanism implements :meth:`_perturb`."""

    def perturb(
        self,
        values: Any,
        *,
        rng: RandomSource | None = None,
        permanent: KeyedSource | None = None,
    ) -> Reports:
        """One report per value. ``permanent``: the keyed source of the device and campaign
        (``client_sdk.secrets_store.DeviceKeys``; a device always passes it, a memoized
        mechanism requires it); without it, a simulated population in which each report draws
        what a device would choose once from ``rng``. ``rng``: the fresh randomness of each
        report (``None``: the OS CSPRNG)."""
        return self._perturb(values, rng, permanent)

    @abc.abstractmethod
    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """:meth:`perturb`'s work, with its arguments as given."""


def is_memoized(mechanism: object) -> bool:
    """True when ``mechanism.perturb`` needs a keyed source (``permanent=``)."""
    return isinstance(mechanism, Memoizing) and bool(mechanism.memoized)


def check_keyed_source(permanent: Any, name: str) -> KeyedSource:
    """A keyed source for ``name``'s memoized draws; ``None`` is refused with a clear error."""
    if permanent is None:
        raise ValueError(
            f"{name}: perturb needs permanent=<keyed source> (client_sdk.secrets_store.DeviceKeys "
            "on a device): permanent responses are derived from it, and a memoized mechanism "
            "never falls back to unmemoized reports"
        )
    if not isinstance(permanent, KeyedSource):
        raise ValueError(
            f"{name}: permanent must be a keyed source (source(label, index), key(label, index)); "
            f"got {type(permanent).__name__}"
        )
    return permanent


# ---- the instantaneous step ----------------------------------------------------------------


def largest_threshold(
    ratio: Callable[[int], Fraction], low: int, high: int, target: Fraction
) -> int:
    """The largest T in [low, high] with ratio(T) <= target; ratio is non-decreasing in T."""
    if ratio(low) > target:
        raise ValueError("no instantaneous randomization reaches the target epsilon")
    if ratio(high) <= target:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if ratio(middle) <= target:
            low = middle
        else:
            high = middle
    return low


def log_fraction(value: Fraction) -> float:
    """ln of a positive fraction, without overflow for large numerators or denominators."""
    return math.log(value.numerator) - math.log(value.denominator)


class Chain(abc.ABC):
    """The instantaneous step composed with a fixed permanent mechanism ``inner``.

    Subclasses give the worst one-report likelihood ratio as an exact function of the step's
    integer threshold, the sampler, the composed support probabilities and the composed channel.
    The threshold is the largest whose ratio is at most ``target`` (e^epsilon of one report).
    """

    kind: ClassVar[str]
    tight: bool = True

    deterministic_pseudonym: ClassVar[bool] = False
    """True when every report carries a public part that is a deterministic function of (device,
    campaign, value): a stable pseudonym that shows whether two reports are of one value
    (docs/math/memoization.md, "What an observer can link")."""

    def __init__(self, inner: MemoizedOracle, target: Fraction) -> None:
        self.inner = inner
        low, high = self.threshold_range()
        self.threshold = largest_threshold(self.ratio, low, high, target)

    @abc.abstractmethod
    def threshold_range(self) -> tuple[int, int]:
        """Thresholds from 'pure noise' (ratio 1) to 'keep the PRR' (ratio of the PRR)."""

    @abc.abstractmethod
    def ratio(self, threshold: int) -> Fraction:
        """max over outputs and input pairs of P[y|x]/P[y|x'] for one report, exactly."""

    @abc.abstractmethod
    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        """One report per permanent response, with fresh randomness."""

    @abc.abstractmethod
    def support(self) -> tuple[Fraction, Fraction]:
        """(p*, q*) of the composed channel, exactly."""

    @abc.abstractmethod
    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        """The one-report channel from a (k, outputs) channel of the permanent step."""

    @property
    def parameter(self) -> Fraction:
        """The step's implemented probability (keep probability, or lambda)."""
        return threshold_probability(self.threshold)

    def epsilon_one(self) -> float:
        """ln of the worst ratio at the chosen threshold."""
        return log_fraction(self.ratio(self.threshold))

    @property
    @abc.abstractmethod
    def resend_probability(self) -> Fraction:
        """P[the step sends the permanent report unchanged], exactly (mixture: lambda, to which a
        fresh report that happens to equal the PRR adds)."""

    @abc.abstractmethod
    def linkability(self) -> str:
        """What an observer can link across reports of one value, with the step's figures."""


def generic_column_profile(inner: MemoizedOracle) -> tuple[Fraction, Fraction, bool]:
    """(R, M, exact) for an oracle of unknown structure: R = e^E, M = (R + k - 1)/k, not exact.

    Valid for every E-LDP channel (an output can be favoured by one input alone), and exact when
    some output column has a single high entry (docs/math/memoization.md).
    """
    high = Fraction(math.exp(inner.privacy_epsilon))
    return high, (high + inner.k - 1) / inner.k, False


class MixtureChain(Chain):
    """With probability lambda the PRR, otherwise a fresh report for a uniform random input.

    Fits any frequency oracle. Its privacy comes from the oracle's worst output column
    (``FrequencyOracle.mixture_column_profile``: R = hi/lo and M = mean/lo):
    ln max (lambda R + (1-lambda) M) / (lambda + (1-lambda) M).
    """

    kind = "mixture"

    def __init__(self, inner: MemoizedOracle, target: Fraction) -> None:
        self.high_ratio, self.mean_ratio, self.tight = inner.mixture_column_profile()
        super().__init__(inner, target)

    def threshold_range(self) -> tuple[int, int]:
        return 0, MAX_THRESHOLD

    def ratio(self, threshold: int) -> Fraction:
        lam = threshold_probability(threshold)
        r, m = self.high_ratio, self.mean_ratio
        return (lam * r + (1 - lam) * m) / (lam + (1 - lam) * m)

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        n = len(permanent)
        keep = bernoulli(rng, self.threshold, n)
        fresh = self.inner.perturb(uniform_below(rng, self.inner.k, n), rng=rng)
        out = np.array(fresh, copy=True)
        out[keep] = np.asarray(permanent)[keep]
        return out

    @property
    def resend_probability(self) -> Fraction:
        return self.parameter

    def linkability(self) -> str:
        lam = float(self.parameter)
        return (
            f"no deterministic component; the permanent report itself is resent with "
            f"probability lambda = {lam:.4g} (a fresh report may also equal it), so two reports "
            f"of one value are identical with probability at least lambda^2 = {lam * lam:.4g}: "
            "a probabilistic link"
        )

    def support(self) -> tuple[Fraction, Fraction]:
        lam = self.parameter
        p, q, k = Fraction(self.inner.p_star), Fraction(self.inner.q_star), self.inner.k
        s = (p + (k - 1) * q) / k
        return lam * p + (1 - lam) * s, lam * q + (1 - lam) * s

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        lam = float(self.parameter)
        mean = permanent_channel.mean(axis=0, keepdims=True)
        return np.asarray(lam * permanent_channel + (1 - lam) * mean, dtype=np.float64)
