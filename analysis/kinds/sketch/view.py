"""The views of the ``sketch`` estimate kind (count sketches and Hadamard sketches decoded
against a candidate list): the heavy-hitter views of the ``discovery`` kind under their own
titles (the candidates' table, the detection thresholds, recall and precision).
"""

from __future__ import annotations

from analysis.kinds.discovery.view import heavy_build, heavy_hitters_display, heavy_render
from analysis.views.dashboard import DashboardView
from analysis.views.report import ReportView

__all__ = ["DASHBOARD", "REPORT"]

REPORT = ReportView("heavy hitters (sketch)", heavy_build, heavy_render)
DASHBOARD = DashboardView("heavy-hitters", "Frequent strings (count sketch)", heavy_hitters_display)
