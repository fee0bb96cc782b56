"""Memoization for every frequency oracle: a permanent response per value, then fresh noise.

Why. A device that reports the same value every day under a fresh epsilon-LDP randomization is
exposed by simple averaging, whatever epsilon each report claims. RAPPOR's answer (Erlingsson,
Pihur, Korolova, CCS 2014; docs/math/memoization.md) is memoization: a *permanent* randomized
response (PRR), drawn once per (device, value) and remembered, and an *instantaneous* randomized
response (IRR) drawn fresh for each report from the PRR. Unlimited reports of one value then
reveal at most what the PRR reveals (epsilon_inf), and any one report reveals at most epsilon_1.

Configuration. A categorical config switches it on with ``"longitudinal": {"epsilon_permanent":
E}`` (optionally ``"allow_pseudonym": true``, which lets ``auto`` consider L-LH); ``epsilon``
stays the guarantee of ONE report (epsilon_1) and E >= epsilon bounds what any number of reports
of one value reveal (epsilon_inf). The PRR is the campaign's own mechanism built at epsilon E
(``inner``); the IRR has one parameter, chosen (largest value on the sampler's 2**-64 grid, by
bisection on the exact rational probabilities) so that the implemented epsilon_1 is exactly at
most ``epsilon`` and tight. ``E < epsilon`` is refused.

Permanent responses are never stored: the PRR of value v is ``inner.perturb([v])`` run on the
word stream ``permanent.source("value", v)`` of the keyed source the device injects (on a
device, HMAC-SHA256 under the device secret and the campaign scope: ``client_sdk.secrets_store``),
so the same (secret, scope, value) always gives the same PRR and a different value or secret
gives an independent one (HMAC-SHA256 as a PRF). The IRR uses the OS CSPRNG (``rng=None``).

The chains (p1, q1: the PRR's implemented probabilities at E; p2, q2: the IRR's). Each oracle
builds its own (``FrequencyOracle.memoization_chain``), in its own module:

``grr`` (grr.py) -- L-GRR (RAPPOR's chain on a k-ary value; multi-freq-ldpy's L-GRR): GRR at
E, then GRR over the same domain applied to the PRR. One report is GRR with
    P' = p1 p2 + (1-p1) q2,   Q' = q1 p2 + (1-q1) q2,   epsilon_1 = ln(P'/Q').
``sue``/``oue`` (unary.py) -- L-UE (RAPPOR's per-bit PRR then IRR, the general two-stage bit
chain; with OUE's PRR this is L-OSUE of Arcolezi et al. 2022): the unary-encoded PRR at E, then
every bit is kept with probability p2 and flipped otherwise. Per bit
    P = p1 p2 + (1-p1)(1-p2),  Q = q1 p2 + (1-q1)(1-p2),  epsilon_1 = ln[P(1-Q)/(Q(1-P))]
(two inputs differ in two bits). The composed report is unary encoding with p* = P, q* = Q.
``blh``/``olh`` (local_hashing.py) -- L-LH: the PRR (seed, y) is memoized whole; the IRR is GRR
over the g buckets applied to y, the seed kept. Given the public seed this is L-GRR over [g]:
P', Q' as above with g for k, and q* = P' c + (1-P')(1-c)/(g-1) (c the family's collision
probability).
anything else (``ss``, ``hr``, future oracles) -- the *mixture* chain (memoization.py): with
probability lambda send the PRR, otherwise a fresh report of the inner mechanism for a uniformly
random input. One report then has the channel A'(y|x) = lambda A(y|x) + (1-lambda) a(y) with
a(y) = mean_u A(y|u), so (docs/math/memoization.md) its support probabilities are
    p*' = lambda p* + (1-lambda) s,   q*' = lambda q* + (1-lambda) s,   s = (p* + (k-1) q*)/k,
and the pure estimator and exact variance apply unchanged. Its privacy, for an output column
with largest entry hi, smallest lo and mean m, is (lambda hi + (1-lambda) m)/(lambda lo +
(1-lambda) m), which grows with hi, falls with lo and with m. Writing R = hi/lo and M = m/lo:
    epsilon_1 = ln max_columns (lambda R + (1-lambda) M) / (lambda + (1-lambda) M).
Each oracle gives its (R, M) (``FrequencyOracle.mixture_column_profile``): for ``ss`` (d members
high, k-d low) M = (d R + k - d)/k exactly; for ``hr`` M comes from the least number c >= 1 of
symbols whose half-set holds an output, M = (c R + k - c)/k (``HR.fewest_holders``, one
Walsh-Hadamard transform per block). For an oracle of unknown structure the bound
M >= (R + k - 1)/k with R = e^E (an output can be favoured by one input alone) holds for every
E-LDP channel, and is the exact value whenever some output column has a single high entry; it is
then used, and ``tight`` says the claim may be loose.

Accuracy. L-GRR's one-report channel *is* GRR at epsilon (P'/Q' = e^eps, P' + (k-1)Q' = 1);
L-UE from OUE keeps P = 1/2, so it is OUE at epsilon; L-LH is local hashing at epsilon over the
PRR's g buckets; SS mixed with a uniform subset is SS at epsilon. So when a shape parameter is
omitted (OLH's g, SS's d, HR's blocks), it is resolved for the chain rather than for E (both are
tried; the least exact total error wins, and the choice is written into the config): then
memoization costs *no* accuracy in one round for grr, sue, oue, blh, olh and ss (the tests pin
it), and little for hr (whose uniform-input mixture is not an HR channel: +3% at k = 64,
epsilon 1, E = 4).

In every chain the IRR is post-processing of the PRR plus noise independent of the value, so
epsilon_inf = E (the PRR's own guarantee). The variance and the estimator are the composed
channel's: in one round every device's report is an independent draw of it (the PRRs of
different devices are independent), so ``analysis.estimate`` works unchanged.

Caveats (as RAPPOR's): memoization protects a value that stays constant. Each distinct value
gets its own PRR, so epsilon_inf is spent once per distinct value (``client_sdk.budget`` counts
it so), and identical consecutive reports show when the value did not change.

Linkability (``linkability``, ``deterministic_pseudonym``, ``resend_probability``). L-GRR and
L-UE reports of one value are i.i.d. given the PRR, with no deterministic component (a report
equals the PRR with probability p2, resp. p2^k). L-LH sends the PRR's hash seed with every report
of the value: a deterministic pseudonym of (device, campaign, value), so any two reports show
whether the value changed (``deterministic_pseudonym`` is True; the device's policy refuses it
unless the app allows it). The mixture chain resends the PRR itself with probability lambda: a
probabilistic link. docs/math/memoization.md states the figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_values
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.memoization import (
    Chain,
    DeviceKeyed,
    KeyedSource,
    check_keyed_source,
    is_memoized,
)
from client_sdk.mechanisms.privacy import PermanentResponseEvent
from client_sdk.randomness import RandomSource

__all__ = [
    "LONGITUDINAL_FIELD",
    "MEMO_LABEL",
    "Memoized",
]

LONGITUDINAL_FIELD = "longitudinal"
"""The config key that switches memoization on."""

MEMO_LABEL = "value"
"""The label of a PRR's memoized draw (``KeyedSource.source(MEMO_LABEL, value)``)."""


@dataclasses.dataclass(frozen=True)
class Memoized(DeviceKeyed, FrequencyOracle):
    """A frequency oracle with a memoized permanent response and a fresh instantaneous one.

    ``inner`` is the campaign's mechanism built at ``epsilon_permanent`` (the PRR); ``epsilon``
    is the guarantee of one report. Reports, wire format and statistic are the inner
    mechanism's; p* and q* are those of the composed channel (module docstring).

    Device side: ``perturb(values, permanent=keys)`` with a keyed source for the campaign
    configuration (``client_sdk.secrets_store.DeviceKeys(secret, config_id)`` on a device).
    Without one it refuses (it never silently sends unmemoized reports). Simulations of a fleet
    of fresh devices use :meth:`perturb_independent_devices`.
    """

    name: ClassVar[str] = "longitudinal"
    inner: FrequencyOracle
    epsilon: float
    k: int = dataclasses.field(init=False)
    allow_pseudonym: bool = dataclasses.field(default=False, kw_only=True)
    """The config's ``longitudinal.allow_pseudonym``: ``auto`` may pick a chain with a
    deterministic pseudonym (L-LH). Recorded in the config; the device's policy still decides."""

    def __post_init__(self) -> None:
        if not isinstance(self.inner, FrequencyOracle) or isinstance(self.inner, Memoized):
            raise ValueError(
                f"inner must be a frequency oracle (not memoized); got {type(self.inner).__name__}"
            )
        if self.inner.memoizes_itself or is_memoized(self.inner):
            raise ValueError(
                f"{self.inner.name!r} has its own memoization; it cannot take 'longitudinal'"
            )
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", self.inner.k)
        if not isinstance(self.allow_pseudonym, bool):
            raise ValueError(
                f"longitudinal.allow_pseudonym must be true or false; got {self.allow_pseudonym!r}"
            )
        permanent = self.inner.privacy_epsilon
        if self.epsilon > permanent:
            raise ValueError(
                f"longitudinal.epsilon_permanent must be >= epsilon (one report can never "
                f"reveal more than all reports); got epsilon_permanent={permanent!r} < "
                f"epsilon={self.epsilon!r}"
            )
        _ = self._chain  # choose the instantaneous step now: refuse impossible configs early

    # ---- configuration ---------------------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """The inner mechanism's config with the one-report epsilon and the longitudinal key."""
        config = self.inner.to_config()
        config["epsilon"] = self.epsilon
        settings: dict[str, Any] = {"epsilon_permanent": self.inner.epsilon}
        if self.allow_pseudonym:
            settings["allow_pseudonym"] = True
        config[LONGITUDINAL_FIELD] = settings
        return config

    # ---- privacy -------------------------------------------------------------------------------

    @cached_property
    def _chain(self) -> Chain:
        return self.inner.memoization_chain(Fraction(math.exp(self.epsilon)))

    @property
    def memoized(self) -> bool:
        return True

    @property
    def chain(self) -> str:
        """Which two-stage chain is used: ``l-grr``, ``l-ue``, ``l-lh`` or ``mixture``."""
        return self._chain.kind

    @property
    def instantaneous_parameter(self) -> float:
        """The IRR's implemented probability: keep probability (l-*) or lambda (mixture)."""
        return float(self._chain.parameter)

    @property
    def epsilon_permanent(self) -> float:
        return self.inner.epsilon

    # ---- linkability (docs/math/memoization.md, "What an observer can link") ----------------

    @property
    def deterministic_pseudonym(self) -> bool:
        """True when every report of a value carries the same public part (L-LH's hash seed): a
        pseudonym of (device, campaign, value). The app's policy refuses such campaigns unless
        it sets ``allow_pseudonymous_memoization``."""
        return self._chain.deterministic_pseudonym

    @property
    def resend_probability(self) -> float:
        """P[a report sends the permanent response unchanged] (the chain's exact figure)."""
        return float(self._chain.resend_probability)

    @property
    def linkability(self) -> str:
        """What an observer can link across reports of one value, with this chain's figures."""
        return f"{self.chain}: {self._chain.linkability()}"

    @property
    def epsilon_inf(self) -> float:
        """What unlimited reports of one value reveal: the PRR's guarantee (E)."""
        return self.inner.privacy_epsilon

    def privacy_event(self) -> PermanentResponseEvent:
        """One report is epsilon_1-DP; all reports of one value share the PRR: the inner oracle
        at E, described by its own event."""
        return PermanentResponseEvent(self.privacy_epsilon, self.inner.privacy_event())

    @property
    def epsilon_one(self) -> float:
        """The exact epsilon of one report, from the implemented probabilities (<= epsilon)."""
        return self._chain.epsilon_one()

    @property
    def claim_is_tight(self) -> bool:
        """False when epsilon_1 comes from the generic bound (unknown inner structure)."""
        return self._chain.tight

    def channel_matrices(self) -> Iterator[FloatArray]:
        """The one-report channel: each permanent channel composed with the IRR."""
        for matrix in self.inner.channel_matrices():
            yield self._chain.compose(matrix)

    def permanent_channel_matrices(self) -> Iterator[FloatArray]:
        """The permanent step alone (its worst ratio is at most e^epsilon_permanent)."""
        return self.inner.channel_matrices()

    def output_index(self, reports: Reports) -> npt.NDArray[np.int64]:
        """The column of ``channel_matrices`` each report falls in (inner's output space)."""
        index = getattr(self.inner, "output_index", None)
        if index is None:
            raise ValueError(f"{self.inner.name} reports carry public randomness; no index")
        return index(reports)

    # ---- device side ---------------------------------------------------------------------------

    def _perturb(
        self, values: Any, rng: RandomSource | None, permanent: KeyedSource | None
    ) -> Reports:
        """One report per value: the memoized PRR of each value under ``permanent``, then a fresh
        IRR.

        ``permanent`` is the keyed source of the device and campaign configuration (required: a
        new configuration gets new permanent responses). ``rng`` drives the IRR only (None: the
        OS CSPRNG).
        """
        x = check_values(values, self.k)
        responses = self.permanent_responses(x, permanent=check_keyed_source(permanent, self.name))
        return self._chain.instantaneous(responses, rng)

    def permanent_responses(self, values: Any, *, permanent: KeyedSource) -> Reports:
        """The PRR of each value, recomputed from the keyed source (same inputs, same output)."""
        x = check_values(values, self.k)
        keys = check_keyed_source(permanent, self.name)
        unique, inverse = np.unique(x, return_inverse=True)
        if unique.size == 0:
            return self.inner.perturb(x, rng=keys.source(MEMO_LABEL, 0))
        rows = [
            self.inner.perturb(
                np.array([value], dtype=np.int64), rng=keys.source(MEMO_LABEL, int(value))
            )
            for value in unique.tolist()
        ]
        return np.concatenate(rows)[inverse.reshape(-1)]

    def perturb_independent_devices(
        self, values: Any, *, rng: RandomSource | None = None
    ) -> Reports:
        """Each value as the first report of its own new device (for simulations and tests).

        The PRR is drawn from ``rng`` instead of a device secret: the distribution of every
        report is the same as :meth:`perturb` on a device with a fresh secret (HMAC-SHA256 as a
        PRF), and different values are independent, as different devices are.
        """
        x = check_values(values, self.k)
        return self._chain.instantaneous(self.inner.perturb(x, rng=rng), rng)

    def memo_keys(self, values: Any, *, permanent: KeyedSource) -> list[str]:
        """The ledger's key of each value's PRR (a keyed hash, not the value)."""
        x = check_values(values, self.k)
        keys = check_keyed_source(permanent, self.name)
        return [keys.key(MEMO_LABEL, int(v)) for v in x.tolist()]

    # ---- wire and statistic: the inner mechanism's -------------------------------------------

    def largest_wire_payload(self) -> Any:
        """The widest payload (``Mechanism.largest_wire_payload``)."""
        return self.inner.largest_wire_payload()

    def to_wire(self, reports: Reports) -> list[Any]:
        return self.inner.to_wire(reports)

    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        return self.inner.parse_wire(payloads)

    def empty_statistic(self) -> AggregateStatistic:
        return self.inner.empty_statistic()

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        return self.inner.aggregate(reports)

    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        return self.inner.support_counts(reports)

    def support_from_statistic(self, statistic: AggregateStatistic) -> FloatArray:
        return self.inner.support_from_statistic(statistic)

    # ---- estimator -----------------------------------------------------------------------------

    @property
    def p_star(self) -> float:
        return float(self._chain.support()[0])

    @property
    def q_star(self) -> float:
        return float(self._chain.support()[1])

    @cached_property
    def _inner_is_pure(self) -> bool:
        cls = type(self.inner)
        return (
            cls.estimate_frequencies is FrequencyOracle.estimate_frequencies
            and cls.variance is FrequencyOracle.variance
            and cls.support_from_statistic is FrequencyOracle.support_from_statistic
        )

    def estimate_frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """The pure estimator with the composed p*, q*; for an inner mechanism with its own
        (linear, unbiased) estimator g under the mixture chain, (g - (1-lambda)/k) / lambda."""
        if self._inner_is_pure:
            return super().estimate_frequencies(statistic)
        lam = float(self._chain.parameter)
        inner = self.inner.estimate_frequencies(statistic)
        return (inner - (1 - lam) / self.k) / lam

    def variance(self, n: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var[f_v] for a fixed population (one report per device).

        Pure inner: section 0 with the composed p*, q*. Otherwise (mixture chain), with
        V(f) = inner.variance(1, f) (linear in f for a per-report average estimator), c =
        (1-lambda)/k and u the uniform distribution:
        n lambda^2 Var = lambda (V(f) + f) + (1-lambda)(V(u) + 1/k) - f (lambda+c)^2 - (1-f) c^2.
        """
        if self._inner_is_pure:
            return super().variance(n, frequencies)
        lam = float(self._chain.parameter)
        f = np.asarray(frequencies, dtype=np.float64)
        uniform = np.full(self.k, 1.0 / self.k)
        c = (1 - lam) / self.k
        second = lam * (self.inner.variance(1, f) + f) + (1 - lam) * (
            self.inner.variance(1, uniform) + 1.0 / self.k
        )
        squared_mean = f * (lam + c) ** 2 + (1 - f) * c**2
        return (second - squared_mean) / (n * lam**2)

    def total_variance(self, n: int = 1) -> float:
        if self._inner_is_pure:
            return super().total_variance(n)
        return float(np.sum(self.variance(n, np.full(self.k, 1.0 / self.k))))
