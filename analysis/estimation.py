"""Estimation with error bars, for every estimate kind: :func:`estimate` runs the estimator of the
mechanism's ``estimate_kind`` from :data:`analysis.kinds.KINDS`.

Reports are reduced chunk by chunk to the mechanism's mergeable sufficient statistic
(``Mechanism.aggregate``; docs/architecture.md), so memory stays O(k + chunk) however many reports
there are. The estimate and its standard errors come from that statistic alone, through the
mechanism's own debiasing and standard errors, so the collector's admin estimate and this one can
never disagree. The estimators themselves live in ``analysis/kinds/<kind>/estimate.py``; the
frequency and mean estimates are re-exported here, as the package's public API names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from analysis.kinds import KINDS
from analysis.kinds.frequencies.estimate import FloatArray, FrequencyEstimate, estimate_frequencies
from analysis.kinds.mean.estimate import MeanEstimate, estimate_mean
from analysis.streaming import ReportSource, aggregate, json_safe, z_value
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.factory import below_epsilon_floor

__all__ = [
    "DocumentedEstimate",
    "FloatArray",
    "FrequencyEstimate",
    "MeanEstimate",
    "ReportSource",
    "aggregate",
    "check_estimable",
    "estimate",
    "estimate_frequencies",
    "estimate_mean",
    "json_safe",
    "z_value",
]


@runtime_checkable
class DocumentedEstimate(Protocol):
    """An estimate that writes its own output: every estimate kind beyond frequencies and means.

    ``to_dict()`` is its JSON-safe document (``n`` and the kind's fields; the CLI adds the
    campaign's name); ``format_table()`` its plain-text table. ``ldp-analyze estimate``, the
    report and the dashboard use these for any such estimate, so a new kind of estimate needs
    no change to them beyond a view of its own.
    """

    n: int

    def to_dict(self) -> dict[str, Any]: ...

    def format_table(self) -> str: ...


def check_estimable(mechanism: Mechanism, candidates: Sequence[str] | None = None) -> None:
    """Refuse, before any report is read, what :func:`estimate` cannot estimate.

    Raises ``ValueError`` for a mechanism whose ``estimate_kind`` has no estimator, and for one
    estimated against candidates (RAPPOR) when none are given.
    """
    kind = getattr(mechanism, "estimate_kind", None)
    if kind not in KINDS:
        raise ValueError(f"mechanism {mechanism.name!r} has no estimator")
    refusal = below_epsilon_floor(mechanism)  # a stored campaign that predates the floor
    if refusal is not None:
        raise ValueError(f"mechanism {mechanism.name!r}: {refusal}")
    if KINDS[kind].needs_candidates and not candidates:
        raise ValueError(
            f"mechanism {mechanism.name!r} records strings and is estimated against a candidate "
            "list, and none was given: pass candidates (`ldp-analyze estimate` uses the "
            "campaign's domain), or export the reports and decode them with "
            "`ldp-analyze rappor-decode --candidates FILE`"
        )


def estimate(
    mechanism: Mechanism,
    reports: ReportSource,
    *,
    confidence: float = 0.95,
    candidates: Sequence[str] | None = None,
) -> Any:
    """Estimate from reports with the mechanism's estimator (``Mechanism.estimate_kind``).

    ``"frequencies"``: the frequencies of the domain (:class:`FrequencyEstimate`); ``"mean"``:
    the mean (:class:`MeanEstimate`); ``"rappor"``: the frequencies of ``candidates``, decoded
    by :func:`analysis.kinds.rappor.estimate.decode` (a ``RapporEstimate``;
    docs/math/rappor.md); further kinds as :data:`analysis.kinds.KINDS` lists them. Kinds that
    fix their domain in the mechanism ignore ``candidates``. ``reports`` is a numpy array of
    reports, an iterable of chunks (streamed, memory O(k + chunk)), or an already merged
    :class:`AggregateStatistic`.
    """
    check_estimable(mechanism, candidates)
    kind = KINDS[mechanism.estimate_kind]
    return kind.estimate(mechanism, reports, confidence=confidence, candidates=candidates or ())
