"""A small seeded campaign of one kind, estimated and seen through its view (the per-kind view
tests in ``tests/analysis/kinds/<kind>/test_view.py``)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from analysis import estimate
from analysis.dataset import StoredCampaign
from analysis.estimation import json_safe
from analysis.kinds import KINDS
from analysis.views.dashboard import DashboardView
from analysis.views.report import Context, ReportView
from client_sdk.mechanisms import mechanism_from_config

N = 3000


def campaign(
    config: dict[str, Any], domain: list[str] | None = None, name: str = "seeded"
) -> StoredCampaign:
    m = mechanism_from_config(config)
    return StoredCampaign(name, m, m.to_config(), domain, None, f"id-{name}", 100,
                          "2026-12-01T00:00:00+00:00", None)  # fmt: skip


@dataclasses.dataclass
class Seen:
    """A view's report section (``data``, ``html``) and dashboard display of one estimate."""

    estimate: Any
    data: dict[str, Any]
    html: str
    figures: dict[str, bytes]
    document: dict[str, Any]
    display: dict[str, Any]

    def cells(self, header: str) -> list[str]:
        """The cells under the first column headed ``header`` of the first table that has it."""
        for found in re.findall(r"<table>.*?</table>", self.html):
            heads = re.findall(r"<th>(.*?)</th>", found)
            if header in heads:
                column = heads.index(header)
                rows = re.findall(r"<tr>(.*?)</tr>", found)[1:]
                return [re.findall(r"<td>(.*?)</td>", row)[column] for row in rows]
        raise AssertionError(f"no column {header!r} in {self.html[:300]}")


def see(
    report: ReportView,
    dashboard: DashboardView,
    stored: StoredCampaign,
    reports: Any,
    *,
    truth: Any = None,
    candidates: Any = None,
    top: int = 10,
    document: Callable[[Any], dict[str, Any]] | None = None,
) -> Seen:
    """``stored``'s estimate of ``reports`` through ``report`` (as the page builds it, with
    the page's ``n``, ``epsilon`` and ``confidence``) and ``dashboard`` (its estimate
    document: ``raw.to_dict()`` as ``ldp-analyze estimate`` writes it for a documented estimate,
    else ``document(raw)``)."""
    raw = estimate(stored.mechanism, reports, candidates=candidates)
    context = Context.of(
        stored,
        raw,
        gaps=KINDS[stored.mechanism.estimate_kind],
        delta=1e-6,
        neighbouring="replace",
        top=top,
        seed=5,
        truth=truth,
    )
    data, figures = report.build(context)
    page = json_safe(
        {
            "n": raw.n,
            "epsilon": stored.mechanism.privacy_epsilon,
            "confidence": raw.confidence,
            **data,
        }
    )
    html = "\n".join(report.render(page, figures))
    shown = json_safe(raw.to_dict() if document is None else document(raw))
    return Seen(raw, page, html, figures, shown, dashboard.build(shown, raw))


def rng(seed: int = 11) -> np.random.Generator:
    return np.random.default_rng(seed)
