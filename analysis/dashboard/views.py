"""One view per kind of estimate, chosen by the mechanism's ``estimate_kind``.

A view (``analysis/kinds/<kind>/view.py``, its ``DASHBOARD``) turns an ``ldp-analyze estimate
--format json`` document (and, where the document alone does not hold it, the estimate object
it came from, such as a distribution's CDF band) into what the page draws: a ``chart`` (a spec
the page's script knows by its ``type``), a ``table`` (column names and rows of raw numbers; the
page formats them), further ``sections`` (each a title with a chart, a table or a ``heatmap``)
and ``notes`` (``analysis.views.dashboard``). Each ``estimate_kind`` of
:data:`analysis.kinds.KINDS` holds its view (``dashboard``); a new kind that needs a new kind of
chart also needs one more renderer in ``static/dashboard.js``.
"""

from __future__ import annotations

from typing import Any

from analysis.kinds import KINDS
from analysis.views.dashboard import DashboardView, Display, Document, interval_chart

__all__ = ["View", "interval_chart", "render"]

View = DashboardView


def render(kind: str, document: Document, estimate: Any = None) -> Display:
    """The view of an estimate document of ``kind``:
    ``{"view", "title", "chart", "table", "sections", "notes"}``."""
    if kind not in KINDS:
        raise ValueError(f"no dashboard view for estimates of kind {kind!r}")
    view = KINDS[kind].dashboard
    return {
        "view": view.name,
        "title": view.title,
        "sections": [],
        "notes": [],
        **view.build(document, estimate),
    }
