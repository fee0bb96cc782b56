"""The base classes every mechanism derives from.

A mechanism is one frozen, validated dataclass that owns everything about itself
(docs/architecture.md): its parameters and config; the device side (``perturb``); its wire encoding
(``to_wire`` / ``parse_wire``); the server side (``aggregate`` into a mergeable sufficient
statistic, debiasing, exact variance); and its privacy claim, stated from the probabilities the
code really implements (``channel_matrix``, ``implemented_epsilon``).

Reports are numpy arrays whose first axis indexes reports (a structured dtype where a report has
several fields), so chunks concatenate with ``numpy.concatenate`` and slice like any array.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms._validation import check_config_keys
from client_sdk.mechanisms.memoization import Chain, MixtureChain, generic_column_profile
from client_sdk.mechanisms.privacy import (
    ApproximateEvent,
    ChannelEvent,
    PrivacyEvent,
    PureEvent,
)
from client_sdk.mechanisms.simplex import project_simplex
from client_sdk.randomness import RandomSource

Reports = npt.NDArray[Any]
FloatArray = npt.NDArray[np.float64]

M = TypeVar("M", bound="Mechanism")

SUMMARY_QUANTILES = (0.5, 0.9, 0.99)
"""The quantiles of the collector's admin summary (:meth:`Mechanism.summary`)."""


def normal_z(confidence: float) -> float:
    """z_{(1 + confidence) / 2}: the half-width of a two-sided normal interval in standard
    errors."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def normal_items(
    labels: Sequence[str], frequencies: Any, std_errors: Any, z: float
) -> list[dict[str, Any]]:
    """One summary item per label: its frequency, standard error and normal interval."""
    return [
        {
            "value": label,
            "frequency": float(f),
            "std_error": float(se),
            "ci_low": float(f - z * se),
            "ci_high": float(f + z * se),
        }
        for label, f, se in zip(labels, frequencies, std_errors, strict=True)
    ]


class WireFormatError(ValueError):
    """A wire payload that does not decode; names the report's index and the reason."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"report {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class AggregateStatistic:
    """A mergeable sufficient statistic: what a mechanism's estimator needs from its reports.

    ``counts`` has a shape fixed by the mechanism (support counts of shape ``(k,)``, an output
    histogram, sums and sums of squares...); ``n`` is the number of reports. Adding two
    statistics equals aggregating the union of their reports, so chunks, shards and machines
    combine with ``+``.
    """

    counts: npt.NDArray[Any]
    n: int

    def __add__(self, other: AggregateStatistic) -> AggregateStatistic:
        if not isinstance(other, AggregateStatistic):
            return NotImplemented
        if self.counts.shape != other.counts.shape:
            raise ValueError(
                f"cannot merge statistics of shapes {self.counts.shape} and {other.counts.shape}"
            )
        return AggregateStatistic(self.counts + other.counts, self.n + other.n)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AggregateStatistic):
            return NotImplemented
        return (
            self.n == other.n
            and self.counts.shape == other.counts.shape
            and bool(np.array_equal(self.counts, other.counts))
        )

    __hash__ = None  # type: ignore[assignment]


ChannelMap = Callable[[FloatArray], FloatArray]
"""A linear map applied on the last axis of an array (rows are independent)."""


@dataclasses.dataclass(frozen=True)
class EMChannel:
    """How the EM of ``analysis.postprocess`` sees a frequency oracle (docs/math/postprocessing.md).

    ``observe`` maps a statistic to the output distribution EM fits; ``forward`` maps input
    distributions over the k items to output distributions (theta A) and ``backward`` maps a
    function of the outputs back to the inputs (A r). ``kind`` is ``"exact"`` when these are the
    mechanism's true channel and its statistic is the output histogram (the multinomial bootstrap
    then draws from ``forward``), and ``"support-count approximation"`` otherwise. ``diagonal``
    is (p, q) when the channel is p I + q (J - I): its MLE then has a closed form.
    """

    kind: Literal["exact", "support-count approximation"]
    k: int
    forward: ChannelMap
    backward: ChannelMap
    observe: Callable[[AggregateStatistic], FloatArray]
    diagonal: tuple[float, float] | None = None

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    @classmethod
    def diagonal_form(
        cls,
        kind: Literal["exact", "support-count approximation"],
        k: int,
        p: float,
        q: float,
        observe: Callable[[AggregateStatistic], FloatArray],
    ) -> EMChannel:
        """The k x k channel p I + q (J - I), applied in O(k) per row without building it."""

        def apply(x: FloatArray) -> FloatArray:
            return q * x.sum(axis=-1, keepdims=True) + (p - q) * x

        return cls(kind, k, apply, apply, observe, (p, q))  # symmetric: forward = backward


def histogram_observation(statistic: AggregateStatistic) -> FloatArray:
    """The output distribution of a statistic that is an output histogram (counts / n)."""
    if statistic.n <= 0:
        raise ValueError("cannot fit EM to zero reports")
    return np.asarray(statistic.counts, dtype=np.float64).ravel() / statistic.n


class Mechanism(abc.ABC):
    """What every mechanism offers, categorical or numeric.

    Subclasses are ``@dataclasses.dataclass(frozen=True)`` whose fields are exactly their config
    fields; ``__post_init__`` validates them and raises ``ValueError`` naming the field and value.
    """

    name: ClassVar[str]
    """The config name (``"grr"``, ``"olh"``...)."""

    value_kind: ClassVar[Literal["category", "number", "string", "record"]]
    """What a device records: a label of the campaign's domain (``"category"``, perturbed as its
    index), a number or vector (``"number"``), any string (``"string"``, estimated against
    candidates), or a tuple of attribute indices (``"record"``, the ``multi`` mechanism).
    Campaign validation, the client and the estimators dispatch on it, never on a
    mechanism's name."""

    def record_from_json(self, value: Any) -> Any:
        """A recorded value as JSON carries it (conformance vectors, another SDK) turned back
        into what the device records; the value itself unless JSON changed its type."""
        return value

    uses_device_choices: ClassVar[bool] = False
    """True for a mechanism that makes a per-device choice (PEM's level, say) from a keyed
    source passed as ``perturb(..., permanent=...)`` rather than from ``rng``: a device then
    makes the same choice in every report of a campaign, and the choice never depends on the
    value. The client passes its keyed source to such mechanisms."""

    estimate_kind: ClassVar[str]
    """Which estimator of ``analysis`` reads this mechanism's statistic (``"frequencies"``,
    ``"mean"``, ``"rappor"``...): the key of ``analysis.estimation.ESTIMATORS``. A mechanism with a
    new kind of estimate names a new key and registers its estimator there."""

    memoizes_itself: ClassVar[bool] = False
    """True for a mechanism with its own memoization (RAPPOR, dBitFlip, 1BitMean): it cannot
    also take the ``"longitudinal"`` wrapper."""

    # What callers ask instead of comparing a mechanism's name (tests/test_layering.py).

    reads_reports: ClassVar[bool] = False
    """True for a mechanism whose estimate reads the reports again beyond the merged statistic
    (PEM: each level's candidates come from the previous level's estimate)."""

    discovery: ClassVar[str | None] = None
    """How a discovery mechanism finds the frequent strings itself (``"prefixes"`` PEM,
    ``"fragments"`` SFP: the key of ``analysis.kinds.discovery.estimate.DECODERS``); such a campaign
    takes no candidate domain. ``None`` for every other mechanism."""

    tests_candidates: ClassVar[bool] = False
    """True for a string mechanism whose estimate tests every string it examines for
    significance, Bonferroni-corrected over them (the sketches, PEM, SFP): the central
    comparison then counts those strings."""

    # ---- configuration -------------------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """A JSON-safe dict; ``mechanism_from_config(m.to_config()) == m``."""
        config: dict[str, Any] = {"mechanism": self.name}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            if not field.init:
                continue
            value = getattr(self, field.name)
            if value is None and field.default is None:
                continue
            config[field.name] = _json_safe(value)
        return config

    @classmethod
    def from_config(cls: type[M], config: Mapping[str, Any]) -> M:
        """Build from a config dict, refusing missing and unknown fields."""
        fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
        required = {
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        optional = {f.name for f in fields} - required
        check_config_keys(config, name=cls.name, required=required, optional=optional)
        if config.get("mechanism", cls.name) != cls.name:
            raise ValueError(f"mechanism must be {cls.name!r}; got {config.get('mechanism')!r}")
        kwargs = {f.name: config[f.name] for f in fields if f.name in config}
        if kwargs.get("selected_by") is not None:
            check_selected_by(kwargs["selected_by"])
        return cls(**kwargs)

    # ---- device side ---------------------------------------------------------------------

    @abc.abstractmethod
    def perturb(self, values: Any, *, rng: RandomSource | None = None) -> Reports:
        """Randomize ``values`` (one per report), vectorized. ``rng=None`` uses the OS CSPRNG."""

    def device_counters(self, values: Any) -> dict[str, int]:
        """Counts the device keeps about the values it randomized (``TelemetryClient.counters``;
        never sent), such as PCKV's records with more pairs than its padding. None by default."""
        return {}

    # ---- wire ----------------------------------------------------------------------------

    @abc.abstractmethod
    def to_wire(self, reports: Reports) -> list[Any]:
        """One JSON-safe payload per report."""

    @abc.abstractmethod
    def parse_wire(self, payloads: Sequence[Any]) -> tuple[Reports, list[WireFormatError]]:
        """Decode payloads, keeping the valid ones and naming each invalid one.

        Returns the reports decoded from the valid payloads (in order) and one
        :class:`WireFormatError` per invalid payload, with its index in ``payloads``.
        """

    def largest_wire_payload(self) -> Any:
        """A payload whose compact JSON is at least as long as that of every payload
        ``parse_wire`` accepts (so of every report ``to_wire`` gives): a deterministic function
        of the config. Sealed envelopes are padded to its length (``client_sdk.sealing``), so
        the envelopes of a campaign have one size whatever the value, level or noise."""
        raise NotImplementedError(f"{type(self).__name__} does not bound its wire payloads")

    def from_wire(self, payloads: Sequence[Any]) -> Reports:
        """Decode payloads; raise :class:`WireFormatError` (a ValueError) at the first bad one."""
        if isinstance(payloads, (str, bytes)) or not isinstance(payloads, Sequence):
            raise ValueError(f"payloads must be a list; got {type(payloads).__name__}")
        reports, errors = self.parse_wire(payloads)
        if errors:
            raise errors[0]
        return reports

    # ---- server side ---------------------------------------------------------------------

    @abc.abstractmethod
    def empty_statistic(self) -> AggregateStatistic:
        """The statistic of zero reports (the identity of ``+``)."""

    @abc.abstractmethod
    def aggregate(self, reports: Reports) -> AggregateStatistic:
        """Reduce a chunk of reports to the mechanism's sufficient statistic (vectorized)."""

    # ---- privacy -------------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def privacy_epsilon(self) -> float:
        """The epsilon this mechanism claims for one report."""

    @property
    def privacy_delta(self) -> float:
        """The delta this mechanism claims for one report (0 for pure epsilon-LDP)."""
        return 0.0

    def privacy_event(self) -> PrivacyEvent:
        """What one report reveals, for the accounting (:mod:`client_sdk.mechanisms.privacy`).

        By default the claim; mechanisms with an exactly known form override it.
        """
        return claim_event(self)

    def null_detection_frequency(self, n: int, critical: float) -> tuple[float, str] | None:
        """The smallest frequency of a string the local estimate of ``n`` reports calls
        significant at the one-sided critical value ``critical``, where the null standard error
        has a closed form, and how it is taken; ``None``: it needs the estimate (the decoder's
        own null standard error)."""
        return None

    # ---- the collector's summary ---------------------------------------------------------

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """The collector's admin estimate of ``statistic`` with normal intervals at
        ``confidence``, from this mechanism's own debiasing and standard errors (the fields
        after the campaign's head; ``labels``: the campaign's domain, if any). ``None``: this
        mechanism has no summary (``ldp-analyze estimate`` answers)."""
        return None


def claim_event(mechanism: Mechanism) -> PrivacyEvent:
    """The event of a mechanism's claim: pure, or approximate when it states a delta."""
    epsilon, delta = float(mechanism.privacy_epsilon), float(mechanism.privacy_delta)
    return PureEvent(epsilon) if delta == 0 else ApproximateEvent(epsilon, delta)


SELECTED_BY = ("auto",)
"""The values ``selected_by`` may take in a config."""


def check_selected_by(value: Any) -> str:
    """A ``selected_by`` config value: one of :data:`SELECTED_BY`."""
    if not isinstance(value, str) or value not in SELECTED_BY:
        raise ValueError(f"selected_by must be one of {', '.join(SELECTED_BY)}; got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Who chose a frequency oracle: a keyword-only config field every oracle inherits.

    ``None`` (left out of the config) when the campaign named the mechanism itself; ``"auto"``
    when ``mechanism_from_config({"mechanism": "auto", ...})`` picked it. It never changes the
    channel, but it is part of the config (so of the config id) and of equality, so
    ``mechanism_from_config(m.to_config()) == m`` holds for an automatic pick too. Being
    keyword-only with a default, it adds nothing to the positional fields of a subclass; being a
    dataclass base, a subclass needs no change to carry it (subclasses are frozen dataclasses).
    """

    selected_by: Literal["auto"] | None = dataclasses.field(default=None, kw_only=True, repr=False)


class FrequencyOracle(Mechanism, Provenance):
    """A categorical mechanism over the domain ``[0, k)`` that estimates frequencies.

    The default server side is the pure-protocol estimator of Wang et al. (USENIX Security 2017;
    docs/math/randomized-response.md): ``support_counts`` C_v, then f_v = (C_v/n - q*) / (p* - q*),
    with the exact fixed-population variance. Mechanisms that are not pure (blocked Hadamard
    response) override ``estimate_frequencies`` and ``variance``.
    """

    epsilon: float
    k: int

    value_kind: ClassVar[Literal["category", "number", "string"]] = "category"
    estimate_kind: ClassVar[str] = "frequencies"

    resolved_shape: ClassVar[str | None] = None
    """The shape parameter this oracle resolves from its epsilon when the config omits it (OLH's
    ``g``, SS's ``d``, HR's ``blocks``); the longitudinal factory resolves it for the composed
    chain instead when that is better."""

    @property
    def privacy_epsilon(self) -> float:
        """The epsilon of one report: the oracle's ``epsilon``."""
        return self.epsilon

    def privacy_event(self) -> PrivacyEvent:
        """The exact channel (``channel_matrices``), or the claim where it is too large."""
        return ChannelEvent(self, fallback=claim_event(self))

    # ---- memoization (docs/math/memoization.md) -----------------------------------------------

    def memoization_chain(self, target: Fraction) -> Chain:
        """The instantaneous step that memoizes this oracle, at one-report ratio ``target``.

        By default the mixture chain, which fits every oracle; oracles with a tighter chain
        (randomized response, local hashing, unary encoding) override this.
        """
        return MixtureChain(self, target)

    def mixture_column_profile(self) -> tuple[Fraction, Fraction, bool]:
        """(R, M, exact) of the worst output column for the mixture chain: R = hi/lo, M = mean/lo.

        By default the bound that holds for every epsilon-LDP channel (``exact`` False);
        oracles that know their columns (subset selection, Hadamard response) override it.
        """
        return generic_column_profile(self)

    # ---- the pure-protocol parameters (implemented values, not the intended ones) ----------

    @property
    @abc.abstractmethod
    def p_star(self) -> float:
        """P[report supports v | the user holds v], as implemented."""

    @property
    @abc.abstractmethod
    def q_star(self) -> float:
        """P[report supports v | the user holds some other value], as implemented."""

    @abc.abstractmethod
    def support_counts(self, reports: Reports) -> npt.NDArray[np.int64]:
        """C_v for every v: how many of ``reports`` support v (shape ``(k,)``)."""

    def empty_statistic(self) -> AggregateStatistic:
        return AggregateStatistic(np.zeros(self.k, dtype=np.int64), 0)

    def aggregate(self, reports: Reports) -> AggregateStatistic:
        return AggregateStatistic(self.support_counts(reports), len(reports))

    def support_from_statistic(self, statistic: AggregateStatistic) -> FloatArray:
        """The support counts C_v held in (or derived from) a statistic."""
        return np.asarray(statistic.counts, dtype=np.float64)

    def estimate_frequencies(self, statistic: AggregateStatistic) -> FloatArray:
        """Unbiased frequency estimates f_v = (C_v/n - q*) / (p* - q*)."""
        if statistic.n <= 0:
            raise ValueError("cannot estimate frequencies from zero reports")
        support = self.support_from_statistic(statistic)
        return (support / statistic.n - self.q_star) / (self.p_star - self.q_star)

    def variance_per_user(self) -> float:
        """Var* = q*(1-q*)/(p*-q*)^2: n times the f-independent part of Var[f_v]."""
        p, q = self.p_star, self.q_star
        return q * (1 - q) / (p - q) ** 2

    def frequency_coefficient(self) -> float:
        """(1-p*-q*)/(p*-q*): n times the coefficient of f_v in Var[f_v]."""
        p, q = self.p_star, self.q_star
        return (1 - p - q) / (p - q)

    def variance(self, n: int, frequencies: npt.ArrayLike) -> FloatArray:
        """Exact Var[f_v] for a fixed population of ``n`` users with these true frequencies.

        Var[f_v] = q*(1-q*)/(n(p*-q*)^2) + f_v(1-p*-q*)/(n(p*-q*))
        (docs/math/randomized-response.md).
        """
        f = np.asarray(frequencies, dtype=np.float64)
        return (self.variance_per_user() + f * self.frequency_coefficient()) / n

    def standard_errors(self, statistic: AggregateStatistic) -> FloatArray:
        """Standard errors of ``estimate_frequencies(statistic)``: sqrt(variance(n, f~)).

        The plug-in f~ for the unknown true frequencies is the Euclidean projection of the raw
        estimate onto the probability simplex (``project_simplex``; docs/math/postprocessing.md).
        It is a distribution, so every sum of frequencies the variance uses (HR's block masses,
        the total of 1 behind the f-coefficient) stays consistent with the data. The raw
        estimate clipped to [0, 1] is not: at large k the noise of the many small items adds up
        (about 7 instead of 1 over HR's single block at k = 1024, eps = 1), which doubled HR's
        standard errors and inflated GRR's by 9%. The collector and ``analysis`` both use this.
        """
        frequencies = self.estimate_frequencies(statistic)
        plug_in = project_simplex(frequencies)[0]
        variance = self.variance(statistic.n, plug_in)
        return np.asarray(np.sqrt(np.maximum(variance, 0.0)), dtype=np.float64)

    def bootstrap_support(
        self,
        cells: npt.NDArray[np.int64],
        devices: npt.NDArray[np.int64],
        p: float,
        q: float,
        rng: np.random.Generator,
    ) -> npt.NDArray[np.int64]:
        """Support counts of simulated reports, (R, size), given each replicate's true counts
        ``cells`` (R, size) among ``devices`` (R, 1) reporting with probabilities ``p`` (own
        item) and ``q`` (any other): each item's support as independent binomials, exact in
        each margin (OUE's bits; OLH's hashes). GRR, whose report supports one item, overrides.
        """
        support = rng.binomial(cells, p) + rng.binomial(devices - cells, q)
        return np.asarray(support, dtype=np.int64)

    def summary(
        self,
        statistic: AggregateStatistic,
        *,
        confidence: float,
        labels: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """f_v from :meth:`estimate_frequencies` (Wang et al. 2017, the pure-protocol
        estimator), :meth:`standard_errors`, and normal intervals at ``confidence``."""
        frequencies = self.estimate_frequencies(statistic)
        std_errors = self.standard_errors(statistic)
        labels = labels or [str(v) for v in range(self.k)]
        return {
            "postprocessing": "base",
            "items": normal_items(labels, frequencies, std_errors, normal_z(confidence)),
        }

    def em_channel(self) -> EMChannel:
        """The channel EM fits: by default the support-count approximation.

        The approximation of multi-freq-ldpy (Arcolezi et al.) treats the normalised support
        counts as the output of the channel p* I + q* (J - I). Mechanisms whose exact channel has
        a compact form override this (GRR, Hadamard response).
        """

        def observe_support(statistic: AggregateStatistic) -> FloatArray:
            support = np.asarray(self.support_from_statistic(statistic), dtype=np.float64)
            total = support.sum()
            if total <= 0:
                raise ValueError("no report supports any item: nothing for EM to fit")
            return support / total

        return EMChannel.diagonal_form(
            "support-count approximation", self.k, self.p_star, self.q_star, observe_support
        )

    def total_variance(self, n: int = 1) -> float:
        """E||f - f_true||^2 at the uniform distribution: [k Var* + coefficient] / n.

        Summed over items, the f-dependent term is exactly the coefficient (frequencies sum to 1),
        so this is the same for every population of a pure protocol; ``auto`` ranks by it.
        """
        return (self.k * self.variance_per_user() + self.frequency_coefficient()) / n

    # ---- exact privacy ---------------------------------------------------------------------

    def channel_matrices(self) -> Iterator[FloatArray]:
        """Exact output distributions, one ``(k, outputs)`` matrix per public condition.

        Row x is P[output | input x] over every output, as implemented (after rounding of the
        probabilities to the sampler's grid). Mechanisms with public randomness (the hash seed of
        local hashing) yield one matrix per value of it that the check should cover. Only for
        small ``k``; raises ``ValueError`` when the output space is too large to enumerate.
        """
        raise NotImplementedError(f"{self.name} does not enumerate its channel")

    def implemented_epsilon(self) -> float:
        """max over outputs and input pairs of ln(P[y|x] / P[y|x']) over ``channel_matrices``."""
        worst = 0.0
        for matrix in self.channel_matrices():
            high = matrix.max(axis=0)
            low = matrix.min(axis=0)
            if np.any(low <= 0) and np.any(high[low <= 0] > 0):
                return math.inf
            worst = max(worst, float(np.max(np.log(high[low > 0]) - np.log(low[low > 0]))))
        return worst


def _json_safe(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value
