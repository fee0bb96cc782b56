"""Memoization for every frequency oracle: a permanent response per value, then fresh noise.

Why. A device that reports the same value every day under a fresh epsilon-LDP randomization is
exposed by simple averaging, whatever epsilon each report claims. RAPPOR's answer (Erlingsson,
Pihur, Korolova, CCS 2014; REFERENCE.md 4.1) is memoization: a *permanent* randomized response
(PRR), drawn once per (device, value) and remembered, and an *instantaneous* randomized response
(IRR) drawn fresh for each report from the PRR. Unlimited reports of one value then reveal at
most what the PRR reveals (epsilon_inf), and any one report reveals at most epsilon_1.

Configuration. A categorical config switches it on with ``"longitudinal": {"epsilon_permanent":
E}``; ``epsilon`` stays the guarantee of ONE report (epsilon_1) and E >= epsilon bounds what any
number of reports of one value reveal (epsilon_inf). The PRR is the campaign's own mechanism
built at epsilon E (``inner``); the IRR has one parameter, chosen (largest value on the
sampler's 2**-64 grid, by bisection on the exact rational probabilities) so that the implemented
epsilon_1 is exactly at most ``epsilon`` and tight. ``E < epsilon`` is refused.

Permanent responses are never stored: the PRR of value v is ``inner.perturb([v])`` run on the
word stream HMAC-SHA256(device secret, campaign scope, v) (``client_sdk.secrets_store``), so the
same (secret, scope, value) always gives the same PRR and a different value or secret gives an
independent one (HMAC-SHA256 as a PRF). The IRR uses the OS CSPRNG (``rng=None``).

The chains (p1, q1: the PRR's implemented probabilities at E; p2, q2: the IRR's):

``grr`` -- L-GRR (RAPPOR's chain on a k-ary value; multi-freq-ldpy's L-GRR): GRR at E, then GRR
over the same domain applied to the PRR. One report is GRR with
    P' = p1 p2 + (1-p1) q2,   Q' = q1 p2 + (1-q1) q2,   epsilon_1 = ln(P'/Q').
``sue``/``oue`` -- L-UE (RAPPOR's per-bit PRR then IRR, REFERENCE.md 4.1 "general two-stage bit
chain"; with OUE's PRR this is L-OSUE of Arcolezi et al. 2022): the unary-encoded PRR at E, then
every bit is kept with probability p2 and flipped otherwise. Per bit
    P = p1 p2 + (1-p1)(1-p2),  Q = q1 p2 + (1-q1)(1-p2),  epsilon_1 = ln[P(1-Q)/(Q(1-P))]
(two inputs differ in two bits). The composed report is unary encoding with p* = P, q* = Q.
``blh``/``olh`` -- L-LH: the PRR (seed, y) is memoized whole; the IRR is GRR over the g buckets
applied to y, the seed kept. Given the public seed this is L-GRR over [g]: P', Q' as above with
g for k, and q* = P' c + (1-P')(1-c)/(g-1) (c the family's collision probability).
anything else (``ss``, ``hr``, future oracles) -- the *mixture* chain: with probability lambda
send the PRR, otherwise a fresh report of the inner mechanism for a uniformly random input.
One report then has the channel A'(y|x) = lambda A(y|x) + (1-lambda) a(y), a(y) = mean_u A(y|u),
so (REFERENCE.md section 0) its support probabilities are
    p*' = lambda p* + (1-lambda) s,   q*' = lambda q* + (1-lambda) s,   s = (p* + (k-1) q*)/k,
and the pure estimator and exact variance apply unchanged. Its privacy, for an output column
with largest entry hi, smallest lo and mean m, is (lambda hi + (1-lambda) m)/(lambda lo +
(1-lambda) m), which grows with hi, falls with lo and with m. Writing R = hi/lo and M = m/lo:
    epsilon_1 = ln max_columns (lambda R + (1-lambda) M) / (lambda + (1-lambda) M).
For ``ss`` (d members high, k-d low) M = (d R + k - d)/k exactly; for ``hr`` M comes from the
least number c >= 1 of symbols whose half-set holds an output, M = (c R + k - c)/k, computed
with one Walsh-Hadamard transform per block. For an oracle of unknown structure the bound
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
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_epsilon, check_values
from client_sdk.mechanisms.base import (
    AggregateStatistic,
    FloatArray,
    FrequencyOracle,
    Mechanism,
    Reports,
    WireFormatError,
)
from client_sdk.mechanisms.privacy import PermanentResponseEvent
from client_sdk.randomness import (
    WORD_SPAN,
    RandomSource,
    bernoulli,
    bernoulli_lazy,
    threshold_probability,
    uniform_below,
)
from client_sdk.secrets_store import check_scope, check_secret, memo_key, memo_source

__all__ = [
    "LONGITUDINAL_FIELD",
    "Memoized",
    "Memoizing",
    "is_memoized",
    "memoized_from_config",
]

LONGITUDINAL_FIELD = "longitudinal"
"""The config key that switches memoization on."""

MEMO_LABEL = "value"
"""The derivation label of a PRR (``secrets_store.memo_source``)."""

SELF_MEMOIZING = ("rappor", "dbitflip", "onebitmean")
"""Mechanisms with their own memoization, refused under ``longitudinal``."""

RESOLVED_SHAPE = {"olh": "g", "ss": "d", "hr": "blocks"}
"""Shape parameters an oracle resolves from its epsilon when the config omits them."""

_MAX_THRESHOLD = WORD_SPAN - 1
_MAX_ENUMERATED_BITS = 10


@runtime_checkable
class Memoizing(Protocol):
    """What the device needs to know about a mechanism with memoized (permanent) responses.

    ``memoized`` says whether ``perturb`` needs ``secret=`` and ``scope=``; ``epsilon_inf`` is what
    unlimited reports of one distinct value reveal (the ledger charges it once per memo key);
    ``memo_keys`` names, for the ledger, the distinct memoized draw each value uses.
    """

    @property
    def memoized(self) -> bool: ...

    @property
    def epsilon_inf(self) -> float: ...

    def memo_keys(self, values: Any, *, secret: bytes, scope: str) -> list[str]: ...


def is_memoized(mechanism: Mechanism) -> bool:
    """True when ``mechanism.perturb`` needs the device secret and scope."""
    return isinstance(mechanism, Memoizing) and bool(mechanism.memoized)


# ---- the instantaneous step: one chain per family --------------------------------------------


def _largest_threshold(
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


class _Chain(abc.ABC):
    """The instantaneous step composed with a fixed permanent mechanism ``inner``.

    Subclasses give the worst one-report likelihood ratio as an exact function of the IRR's
    integer threshold, the sampler, the composed support probabilities and the composed channel.
    """

    kind: ClassVar[str]
    tight: bool = True

    def __init__(self, inner: FrequencyOracle, target: Fraction) -> None:
        self.inner = inner
        low, high = self.threshold_range()
        self.threshold = _largest_threshold(self.ratio, low, high, target)

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
        """The IRR's implemented probability (keep probability, or lambda)."""
        return threshold_probability(self.threshold)

    def epsilon_one(self) -> float:
        """ln of the worst ratio at the chosen threshold."""
        return _log(self.ratio(self.threshold))


def _log(value: Fraction) -> float:
    return math.log(value.numerator) - math.log(value.denominator)


def _grr_composition(p1: Fraction, p2: Fraction, size: int) -> tuple[Fraction, Fraction]:
    """(P', Q'): GRR with keep probability p1 then GRR with p2, over ``size`` symbols."""
    q1 = (1 - p1) / (size - 1)
    q2 = (1 - p2) / (size - 1)
    return p1 * p2 + (1 - p1) * q2, q1 * p2 + (1 - q1) * q2


def _grr_matrix(p: Fraction, size: int) -> FloatArray:
    matrix = np.full((size, size), float((1 - p) / (size - 1)))
    np.fill_diagonal(matrix, float(p))
    return matrix


def _grr_step(
    values: npt.NDArray[np.int64], threshold: int, size: int, rng: RandomSource | None
) -> npt.NDArray[np.int64]:
    """GRR over [size] at keep threshold ``threshold`` (the sampler of grr.py)."""
    keep = bernoulli(rng, threshold, values.size)
    if size == 2:
        return np.where(keep, values, 1 - values)
    other = uniform_below(rng, size - 1, values.size)
    other += other >= values
    return np.where(keep, values, other)


class _ValueChain(_Chain):
    """L-GRR: GRR at E, then GRR over [k] applied to the permanent value."""

    kind = "l-grr"

    @cached_property
    def _p1(self) -> Fraction:
        return self.inner._keep_probability  # type: ignore[attr-defined, no-any-return]

    def threshold_range(self) -> tuple[int, int]:
        return -(-WORD_SPAN // self.inner.k), _MAX_THRESHOLD

    def ratio(self, threshold: int) -> Fraction:
        big, small = _grr_composition(self._p1, threshold_probability(threshold), self.inner.k)
        return big / small

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        return _grr_step(np.asarray(permanent, dtype=np.int64), self.threshold, self.inner.k, rng)

    def support(self) -> tuple[Fraction, Fraction]:
        return _grr_composition(self._p1, self.parameter, self.inner.k)

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        return permanent_channel @ _grr_matrix(self.parameter, self.inner.k)


class _HashedChain(_Chain):
    """L-LH: the PRR (seed, y) memoized whole; the IRR is GRR over [g] on y, seed kept."""

    kind = "l-lh"

    @cached_property
    def _p1(self) -> Fraction:
        return self.inner._keep_probability  # type: ignore[attr-defined, no-any-return]

    @property
    def _g(self) -> int:
        return int(self.inner.buckets)  # type: ignore[attr-defined]

    def threshold_range(self) -> tuple[int, int]:
        return -(-WORD_SPAN // self._g), _MAX_THRESHOLD

    def ratio(self, threshold: int) -> Fraction:
        big, small = _grr_composition(self._p1, threshold_probability(threshold), self._g)
        return big / small

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        out = np.array(permanent, copy=True)
        y = np.asarray(out["y"], dtype=np.int64)
        out["y"] = _grr_step(y, self.threshold, self._g, rng)
        return out

    def support(self) -> tuple[Fraction, Fraction]:
        keep, _ = _grr_composition(self._p1, self.parameter, self._g)
        collision = Fraction(self.inner.collision_probability)  # type: ignore[attr-defined]
        g = self._g
        return keep, keep * collision + (1 - keep) * (1 - collision) / (g - 1)

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        return permanent_channel @ _grr_matrix(self.parameter, self._g)


class _BitChain(_Chain):
    """L-UE: unary-encoded PRR at E, then every bit kept with probability p2, else flipped."""

    kind = "l-ue"

    @cached_property
    def _pq1(self) -> tuple[Fraction, Fraction]:
        return self.inner._implemented  # type: ignore[attr-defined, no-any-return]

    def threshold_range(self) -> tuple[int, int]:
        return WORD_SPAN // 2, _MAX_THRESHOLD

    def _bits(self, keep: Fraction) -> tuple[Fraction, Fraction]:
        p1, q1 = self._pq1
        return p1 * keep + (1 - p1) * (1 - keep), q1 * keep + (1 - q1) * (1 - keep)

    def ratio(self, threshold: int) -> Fraction:
        big, small = self._bits(threshold_probability(threshold))
        return big * (1 - small) / (small * (1 - big))

    def instantaneous(self, permanent: Reports, rng: RandomSource | None) -> Reports:
        rows = np.asarray(permanent, dtype=np.uint8)
        k = self.inner.k
        flip_threshold = WORD_SPAN - self.threshold  # P[flip] = 1 - p2 exactly
        out = np.empty_like(rows)
        step = max(1, (1 << 23) // k)
        for start in range(0, rows.shape[0], step):
            chunk = rows[start : start + step]
            bits = np.unpackbits(chunk, axis=1, count=k).astype(bool)
            bits ^= bernoulli_lazy(rng, flip_threshold, bits.shape)
            out[start : start + chunk.shape[0]] = np.packbits(bits, axis=1)
        return out

    def support(self) -> tuple[Fraction, Fraction]:
        return self._bits(self.parameter)

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        k = self.inner.k
        if k > _MAX_ENUMERATED_BITS:
            raise ValueError(f"k={k} is too large to enumerate (limit {_MAX_ENUMERATED_BITS})")
        outputs = np.arange(1 << k)
        differing = np.zeros((outputs.size, outputs.size), dtype=np.int64)
        xor = outputs[:, None] ^ outputs[None, :]
        for bit in range(k):
            differing += (xor >> bit) & 1
        keep = float(self.parameter)
        transition = keep ** (k - differing) * (1 - keep) ** differing
        return permanent_channel @ transition


class _MixtureChain(_Chain):
    """With probability lambda the PRR, otherwise a fresh report for a uniform random input."""

    kind = "mixture"

    def __init__(self, inner: FrequencyOracle, target: Fraction) -> None:
        self.high_ratio, self.mean_ratio, self.tight = _column_profile(inner)
        super().__init__(inner, target)

    def threshold_range(self) -> tuple[int, int]:
        return 0, _MAX_THRESHOLD

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

    def support(self) -> tuple[Fraction, Fraction]:
        lam = self.parameter
        p, q, k = Fraction(self.inner.p_star), Fraction(self.inner.q_star), self.inner.k
        s = (p + (k - 1) * q) / k
        return lam * p + (1 - lam) * s, lam * q + (1 - lam) * s

    def compose(self, permanent_channel: FloatArray) -> FloatArray:
        lam = float(self.parameter)
        mean = permanent_channel.mean(axis=0, keepdims=True)
        return lam * permanent_channel + (1 - lam) * mean


def _column_profile(inner: FrequencyOracle) -> tuple[Fraction, Fraction, bool]:
    """(R, M, exact) of the worst output column of ``inner`` (module docstring)."""
    k = inner.k
    if inner.name == "ss":
        inside, outside = inner.subset_probabilities()  # type: ignore[attr-defined]
        high = Fraction(inside) / Fraction(outside)
        d = int(inner.size)  # type: ignore[attr-defined]
        return high, (d * high + k - d) / k, True
    if inner.name == "hr":
        alpha, beta = inner._levels  # type: ignore[attr-defined]
        high = Fraction(alpha) / Fraction(beta)
        fewest = _hadamard_fewest_holders(inner)
        return high, (fewest * high + k - fewest) / k, True
    high = Fraction(math.exp(inner.privacy_epsilon))
    return high, (high + k - 1) / k, False


def _hadamard_fewest_holders(inner: FrequencyOracle) -> int:
    """The least c in [1, k-1] such that some output lies in exactly c symbols' half-sets.

    Layout of hadamard.py: symbol x owns row x % (b-1) + 1 of H_b in block x // (b-1); output
    offset o of a block lies in the half-set of row r iff H_b[r, o] = +1. For the rows R_j of a
    block, the count at o is (|R_j| + sum_{r in R_j} H_b[r, o]) / 2: one FWHT of R_j's indicator.
    """
    from client_sdk.mechanisms.hadamard import fwht

    k, b = inner.k, int(inner.block_size)  # type: ignore[attr-defined]
    fewest = k
    per_block = b - 1
    for rows in {min(per_block, k - start) for start in range(0, k, per_block)}:
        indicator = np.zeros(b, dtype=np.int64)
        indicator[1 : rows + 1] = 1
        counts = (rows + fwht(indicator)) // 2
        useful = counts[(counts >= 1) & (counts <= k - 1)]
        if useful.size:
            fewest = min(fewest, int(useful.min()))
    if fewest >= k:
        raise ValueError("no output of the Hadamard response separates two inputs")
    return fewest


_CHAINS: dict[str, type[_Chain]] = {
    "grr": _ValueChain,
    "sue": _BitChain,
    "oue": _BitChain,
    "blh": _HashedChain,
    "olh": _HashedChain,
}


# ---- the wrapper ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Memoized(FrequencyOracle):
    """A frequency oracle with a memoized permanent response and a fresh instantaneous one.

    ``inner`` is the campaign's mechanism built at ``epsilon_permanent`` (the PRR); ``epsilon``
    is the guarantee of one report. Reports, wire format and statistic are the inner
    mechanism's; p* and q* are those of the composed channel (module docstring).

    Device side: ``perturb(values, secret=device_secret, scope=config_id)``; the secret comes
    from :func:`client_sdk.secrets_store.load_or_create_device_secret`. Without a secret it
    refuses (it never silently sends unmemoized reports). Simulations of a fleet of fresh devices
    use :meth:`perturb_independent_devices`.
    """

    name: ClassVar[str] = "longitudinal"
    inner: FrequencyOracle
    epsilon: float
    k: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.inner, FrequencyOracle) or isinstance(self.inner, Memoized):
            raise ValueError(
                f"inner must be a frequency oracle (not memoized); got {type(self.inner).__name__}"
            )
        if self.inner.name in SELF_MEMOIZING or is_memoized(self.inner):
            raise ValueError(
                f"{self.inner.name!r} has its own memoization; it cannot take 'longitudinal'"
            )
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", self.inner.k)
        permanent = self.inner.privacy_epsilon
        if self.epsilon > permanent:
            raise ValueError(
                f"longitudinal.epsilon_permanent must be >= epsilon (one report can never "
                f"reveal more than all reports); got epsilon_permanent={permanent!r} < "
                f"epsilon={self.epsilon!r}"
            )
        _ = self._chain  # choose the instantaneous step now: refuse impossible configs early

    # ---- configuration ---------------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Memoized:  # type: ignore[override]
        return memoized_from_config(config)

    def to_config(self) -> dict[str, Any]:
        """The inner mechanism's config with the one-report epsilon and the longitudinal key."""
        config = self.inner.to_config()
        config["epsilon"] = self.epsilon
        config[LONGITUDINAL_FIELD] = {"epsilon_permanent": self.inner.epsilon}
        return config

    # ---- privacy -------------------------------------------------------------------------------

    @cached_property
    def _chain(self) -> _Chain:
        chain_class = _CHAINS.get(self.inner.name, _MixtureChain)
        return chain_class(self.inner, Fraction(math.exp(self.epsilon)))

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
        return index(reports)  # type: ignore[no-any-return]

    # ---- device side ---------------------------------------------------------------------------

    def perturb(
        self,
        values: Any,
        *,
        rng: RandomSource | None = None,
        secret: bytes | None = None,
        scope: str | None = None,
    ) -> Reports:
        """One report per value: the memoized PRR of (secret, scope, value), then a fresh IRR.

        ``secret`` is the device secret (bytes, never sent); ``scope`` names the campaign
        configuration (its config id), so a new configuration gets new permanent responses.
        Both are required. ``rng`` drives the IRR only (None: the OS CSPRNG).
        """
        x = check_values(values, self.k)
        permanent = self.permanent_responses(x, secret=check_secret(secret), scope=scope)
        return self._chain.instantaneous(permanent, rng)

    def permanent_responses(self, values: Any, *, secret: bytes, scope: str | None) -> Reports:
        """The PRR of each value, recomputed from HMAC-SHA256 (same inputs, same output)."""
        x = check_values(values, self.k)
        key, scope_name = check_secret(secret), check_scope(scope)
        unique, inverse = np.unique(x, return_inverse=True)
        if unique.size == 0:
            return self.inner.perturb(x, rng=memo_source(key, scope_name, MEMO_LABEL, 0))
        rows = [
            self.inner.perturb(
                np.array([value], dtype=np.int64),
                rng=memo_source(key, scope_name, MEMO_LABEL, int(value)),
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

    def memo_keys(self, values: Any, *, secret: bytes, scope: str) -> list[str]:
        """The ledger's key of each value's PRR (an HMAC under the secret, not the value)."""
        x = check_values(values, self.k)
        key, scope_name = check_secret(secret), check_scope(scope)
        return [memo_key(key, scope_name, MEMO_LABEL, int(v)) for v in x.tolist()]

    # ---- wire and statistic: the inner mechanism's -------------------------------------------

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


# ---- configs -------------------------------------------------------------------------------------


def memoized_from_config(config: Mapping[str, Any]) -> Memoized:
    """Build the memoized mechanism of a config carrying ``"longitudinal"``.

    ``{"mechanism": "auto", ...}`` picks, among the registered candidates, the one whose
    *composed* channel has the least exact total error at these (epsilon, E).
    """
    from client_sdk.mechanisms.registry import mechanism_class

    if not isinstance(config, Mapping):
        raise ValueError(f"a mechanism config must be a JSON object; got {type(config).__name__}")
    settings = config.get(LONGITUDINAL_FIELD)
    if not isinstance(settings, Mapping):
        raise ValueError(
            f'longitudinal must be an object {{"epsilon_permanent": E}}; got {settings!r}'
        )
    unknown = sorted(set(settings) - {"epsilon_permanent"})
    if unknown:
        raise ValueError(f"longitudinal has unknown field(s) {', '.join(map(str, unknown))}")
    if "epsilon_permanent" not in settings:
        raise ValueError("longitudinal is missing epsilon_permanent")
    permanent = check_epsilon(settings["epsilon_permanent"], "longitudinal.epsilon_permanent")
    if "epsilon" not in config:
        raise ValueError("config is missing the field 'epsilon'")
    epsilon = check_epsilon(config["epsilon"])
    if permanent < epsilon:
        raise ValueError(
            f"longitudinal.epsilon_permanent must be >= epsilon (one report can never reveal "
            f"more than all reports); got {permanent!r} < {epsilon!r}"
        )
    name: Any = config.get("mechanism")
    if name in SELF_MEMOIZING:
        raise ValueError(f"{name!r} has its own memoization; it cannot take 'longitudinal'")
    inner_config = {key: value for key, value in config.items() if key != LONGITUDINAL_FIELD}
    inner_config["epsilon"] = permanent
    if name == "auto":
        return _select_memoized(inner_config, epsilon)
    shape = RESOLVED_SHAPE.get(name)
    if shape is not None and inner_config.get(shape) is None:
        return _best_shape(name, shape, inner_config, epsilon)
    inner = mechanism_class(name).from_config(inner_config)
    if not isinstance(inner, FrequencyOracle):
        raise ValueError(f"longitudinal applies to frequency oracles; {name!r} is not one")
    return Memoized(inner=inner, epsilon=epsilon)


def _best_shape(name: str, shape: str, inner_config: Mapping[str, Any], epsilon: float) -> Memoized:
    """Resolve an omitted shape parameter (OLH's g, SS's d, HR's blocks) for the composed chain.

    The mechanism would resolve it for the epsilon it is built at, E, but what one report reveals
    is epsilon: OLH's g = round(e^eps + 1) makes L-LH's composed channel exactly OLH at epsilon.
    Both resolutions are tried and the one with the least exact total error is kept (ties: E's).
    The choice is written into the config, so it round-trips.
    """
    from client_sdk.mechanisms.registry import mechanism_class

    cls = mechanism_class(name)
    best: Memoized | None = None
    for resolve_at in (inner_config["epsilon"], epsilon):
        value = getattr(cls.from_config({**inner_config, "epsilon": resolve_at}), shape)
        inner = cls.from_config({**inner_config, shape: value})
        assert isinstance(inner, FrequencyOracle)
        candidate = Memoized(inner=inner, epsilon=epsilon)
        if best is None or candidate.total_variance() < best.total_variance() * (1 - 1e-12):
            best = candidate
    assert best is not None
    return best


def _select_memoized(inner_config: Mapping[str, Any], epsilon: float) -> Memoized:
    from client_sdk.mechanisms.auto import CANDIDATES, TIE_RTOL
    from client_sdk.mechanisms.registry import MECHANISMS

    unknown = sorted(set(inner_config) - {"mechanism", "epsilon", "k"})
    if unknown:
        raise ValueError(f"config for 'auto' has unknown field(s) {', '.join(unknown)}")
    if "k" not in inner_config:
        raise ValueError("config for 'auto' is missing k")
    ranked: list[tuple[Memoized, float]] = []
    for name in CANDIDATES:
        if name not in MECHANISMS:
            continue
        try:
            candidate = memoized_from_config(
                {
                    "mechanism": name,
                    "epsilon": epsilon,
                    "k": inner_config["k"],
                    LONGITUDINAL_FIELD: {"epsilon_permanent": inner_config["epsilon"]},
                }
            )
        except ValueError:
            continue
        ranked.append((candidate, candidate.total_variance()))
    if not ranked:
        raise ValueError(f"no memoized frequency oracle accepts {dict(inner_config)!r}")
    best = min(error for _, error in ranked)
    chosen = next(m for m, error in ranked if error <= best * (1 + TIE_RTOL))
    inner = dataclasses.replace(chosen.inner, selected_by="auto")
    return Memoized(inner=inner, epsilon=epsilon)
