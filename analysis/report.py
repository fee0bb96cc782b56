"""One self-contained HTML page about a campaign, and the same numbers as JSON.

For a categorical campaign (a frequency oracle) the page (``analysis.kinds.frequencies.view``)
shows (``ldp-analyze report``):

1. the estimated frequencies of the top items with their intervals, raw and post-processed
   (``analysis.postprocess``), each with its Bonferroni significance (``analysis.heavy_hitters``);
2. the error of this LDP campaign against a central curator at the same epsilon
   (``analysis.gap``), and what the same reports give behind a shuffler
   (``client_sdk.amplification``);
3. the error against n for both models, this campaign's n marked;
4. the privacy parameters and their accounting over a device's repeated reports
   (``analysis.accounting``): the exact epsilon of T reports against the classical bounds.

Every other estimate kind (means, RAPPOR, heavy hitters, marginals, distributions, ranges,
key-value) has its own view (``analysis/kinds/<kind>/view.py``, on the page of
``analysis.report_kinds``; which page a kind has is its :class:`analysis.kinds.Kind`'s
``report``): the estimate, its central gap, then the same privacy section. A
shuffled campaign's page states both guarantees: the local epsilon of each report and the
central (epsilon, delta) of the batches the collector received (and, for frequencies, the error
of local-only, shuffled and curator collection at that central guarantee).

Figures are PNGs embedded as base64 data URIs, so the page needs no other file and no network.
Every string taken from the campaign (its name, labels) is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from analysis.dataset import StoredCampaign
from analysis.gap import DEFAULT_DELTA
from analysis.kinds import KINDS, Kind
from analysis.postprocess import DEFAULT_REPLICATES
from analysis.report_common import (
    Report,
    central_section,
    privacy_figure,
    privacy_html,
    privacy_section,
)
from analysis.report_kinds import build_kind_report, render_kind_html
from analysis.views.report import ReportPage
from client_sdk.mechanisms.base import Mechanism

__all__ = [
    "Report",
    "build_report",
    "central_section",
    "privacy_figure",
    "privacy_html",
    "privacy_section",
    "render_html",
]

DEFAULT_TOP = 20


def _kind(mechanism: Mechanism | None, kind: str) -> Kind:
    if kind not in KINDS:
        name = mechanism.name if mechanism is not None else None
        raise ValueError(
            f"mechanism {name!r} (estimate kind {kind!r}) has no report: the report covers "
            f"{', '.join(sorted(KINDS))}; use `ldp-analyze estimate` for its numbers"
        )
    return KINDS[kind]


def build_report(
    campaign: StoredCampaign,
    raw: Any,
    *,
    method: str = "norm-sub",
    delta: float = DEFAULT_DELTA,
    neighbouring: str = "replace",
    top: int = DEFAULT_TOP,
    alpha: float = 0.05,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = 0,
    true_counts: npt.ArrayLike | None = None,
    truth: Any = None,
    batch_sizes: Sequence[int] | None = None,
    batch_credentials: Sequence[tuple[int, int | None, int | None]] | None = None,
) -> Report:
    """Compute every number and figure of a campaign's report from its raw estimate.

    ``true_counts`` (simulations and the demo only) adds the truth to the frequency figure and
    the observed errors of both models (``analysis.gap.empirical_gap``). For the other
    estimate kinds, ``truth`` is the kind's truth (``analysis.gap.measured_kind_gap``: the true
    count of each string, the true records, the true values; ``true_counts`` is taken when it
    is not given). ``batch_sizes``: a shuffled campaign's received batches (its central
    guarantee), ``batch_credentials`` how the shuffler metered them
    (``collector.storage.Storage.batch_credentials``).
    """
    mechanism = campaign.mechanism
    view = _kind(mechanism, mechanism.estimate_kind).report
    if isinstance(view, ReportPage):
        return view.build(
            campaign,
            raw,
            method=method,
            delta=delta,
            neighbouring=neighbouring,
            top=top,
            alpha=alpha,
            replicates=replicates,
            seed=seed,
            true_counts=true_counts,
            batch_sizes=batch_sizes,
            batch_credentials=batch_credentials,
        )
    return build_kind_report(
        campaign,
        raw,
        delta=delta,
        neighbouring=neighbouring,
        top=top,
        seed=seed,
        truth=truth if truth is not None else true_counts,
        batch_sizes=batch_sizes,
        batch_credentials=batch_credentials,
    )


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page."""
    # a frequency report's document has no "kind": it predates the other kinds' pages
    view = _kind(None, report.data.get("kind", "frequencies")).report
    if isinstance(view, ReportPage):
        return view.render(report)
    return render_kind_html(report)
