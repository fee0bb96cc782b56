"""The report page of every estimate kind whose view is a set of sections (``analysis.report``).

Each such kind's :class:`analysis.kinds.Kind` holds its report view (``report``, from
``analysis/kinds/<kind>/view.py``: what the page shows of the estimate and of its central gap,
``analysis.gap.kind_gap`` and with the truth ``analysis.gap.measured_kind_gap``); this module
writes the page around it: the title and the campaign's line, the view's sections, a shuffled
campaign's two guarantees and the privacy section.
"""

from __future__ import annotations

import datetime
import html
import json
from collections.abc import Sequence
from typing import Any

from analysis import report_common
from analysis.dataset import StoredCampaign
from analysis.estimation import json_safe
from analysis.kinds import KINDS
from analysis.views.answer import answer_html
from analysis.views.cells import fmt_number
from analysis.views.report import Context, ReportView

__all__ = ["build_kind_report", "render_kind_html", "section_view"]


def section_view(kind: str) -> ReportView:
    """The report view of ``kind`` (a :class:`ReportView`: sections on this module's page)."""
    view = KINDS[kind].report
    if not isinstance(view, ReportView):
        raise ValueError(f"the estimate kind {kind!r} writes its own report page")
    return view


def build_kind_report(
    campaign: StoredCampaign,
    estimate: Any,
    *,
    delta: float,
    neighbouring: str,
    top: int,
    seed: int,
    truth: Any = None,
    batch_sizes: Sequence[int] | None = None,
    batch_credentials: Sequence[tuple[int, int | None, int | None]] | None = None,
) -> Any:
    """The report of a campaign whose estimate kind's view is a :class:`ReportView`."""
    report = report_common
    mechanism = campaign.mechanism
    kind = mechanism.estimate_kind
    view = section_view(kind)
    context = Context.of(
        campaign,
        estimate,
        gaps=KINDS[kind],
        delta=delta,
        neighbouring=neighbouring,
        top=top,
        seed=seed,
        truth=truth,
    )
    data, figures = view.build(context)
    privacy = report.privacy_section(
        mechanism, delta=delta, reports_per_device=report.reports_per_device_of(campaign.policy)
    )
    figures["privacy"] = report.privacy_figure(privacy)
    document = json_safe(
        {
            "campaign": campaign.name,
            "kind": kind,
            "config_id": campaign.config_id,
            "mechanism": campaign.config,
            "created": campaign.created,
            "min_batch_size": campaign.min_batch_size,
            "n": estimate.n,
            "epsilon": mechanism.privacy_epsilon,
            "confidence": getattr(estimate, "confidence", 0.95),
            # What it measures and in what unit (the answer sentence and the axes say it).
            **{k: campaign.metadata[k] for k in ("description", "unit") if k in campaign.metadata},
            **data,
            "central": report.central_section(campaign, batch_sizes, batch_credentials),
            "privacy": privacy,
            "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return report.Report(data=document, figures=figures)


def render_kind_html(report: Any) -> str:
    """The page of a report built by :func:`build_kind_report`."""
    helpers = report_common
    d = report.data
    view = section_view(d["kind"])
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>LDP report: {esc(d['campaign'])}</title><style>{helpers.STYLE}</style>"
        "</head><body>",
        f"<h1>Campaign <code>{esc(d['campaign'])}</code>: {esc(view.title)}</h1>",
        f'<p class="meta">mechanism <code>{esc(json.dumps(d["mechanism"], sort_keys=True))}'
        f"</code> &middot; config id <code>{esc(str(d['config_id']))}</code> &middot; n = "
        f"{fmt_number(d['n'])} reports &middot; created {esc(str(d['created']))} &middot; "
        f"generated {esc(str(d['generated']))}</p>",
    ]
    parts += answer_html(d)
    parts += view.render(d, report.figures)
    parts += helpers.central_html(d.get("central"))
    parts += helpers.privacy_html(d, report.figures, number=3)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
