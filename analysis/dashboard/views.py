"""One view per kind of estimate, chosen by the mechanism's ``estimate_kind``.

A view (``analysis/kinds/<kind>/view.py``, its ``DASHBOARD``) turns an ``ldp-analyze estimate
--format json`` document (and, where the document alone does not hold it, the estimate object
it came from, such as a distribution's CDF band) into what the page draws: a ``chart`` (a spec
the page's script knows by its ``type``), a ``table`` (column names and rows of raw numbers; the
page formats them), further ``sections`` (each a title with a chart, a table or a ``heatmap``)
and ``notes`` (``analysis.views.dashboard``). :data:`VIEWS` maps each ``estimate_kind`` of
``analysis.estimation.ESTIMATORS`` to its view; a new kind that needs a new kind of chart also
needs one more renderer in ``static/dashboard.js``.
"""

from __future__ import annotations

from typing import Any

from analysis.kinds.discovery import view as discovery
from analysis.kinds.distribution import view as distribution
from analysis.kinds.fourier import view as fourier
from analysis.kinds.frequencies import view as frequencies
from analysis.kinds.key_value import view as key_value
from analysis.kinds.mean import view as mean
from analysis.kinds.multi import view as multi
from analysis.kinds.ranges import view as ranges
from analysis.kinds.rappor import view as rappor
from analysis.kinds.sketch import view as sketch
from analysis.views.dashboard import DashboardView, Display, Document, interval_chart

__all__ = ["VIEWS", "View", "interval_chart", "render"]

View = DashboardView

VIEWS: dict[str, DashboardView] = {
    "frequencies": frequencies.DASHBOARD,
    "mean": mean.DASHBOARD,
    "rappor": rappor.DASHBOARD,
    "sketch": sketch.DASHBOARD,
    "discovery": discovery.DASHBOARD,
    "distribution": distribution.DASHBOARD,
    "range": ranges.DASHBOARD,
    "multi": multi.DASHBOARD,
    "fourier": fourier.DASHBOARD,
    "key-value": key_value.DASHBOARD,
}
"""The view of each ``Mechanism.estimate_kind``."""


def render(kind: str, document: Document, estimate: Any = None) -> Display:
    """The view of an estimate document of ``kind``:
    ``{"view", "title", "chart", "table", "sections", "notes"}``."""
    view = VIEWS.get(kind)
    if view is None:
        raise ValueError(f"no dashboard view for estimates of kind {kind!r}")
    return {
        "view": view.name,
        "title": view.title,
        "sections": [],
        "notes": [],
        **view.build(document, estimate),
    }
