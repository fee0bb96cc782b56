"""The mean kind's views on a small seeded campaign: the report's table carries the estimate's
numbers (and the truth only when given), the dashboard draws the same interval."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.kinds.mean.view import DASHBOARD, REPORT
from analysis.views.cells import fmt_number
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "piecewise", "epsilon": 2.0, "lower": 0, "upper": 10}


def _document(raw: Any) -> dict[str, Any]:
    """The fields of ``ldp-analyze estimate``'s mean document the view reads."""
    names = ("n", "confidence", "mean", "std_error", "ci_low", "ci_high")
    fields = ("n", "confidence", "mean", "std_errors", "ci_low", "ci_high")
    return {name: getattr(raw, f) for name, f in zip(names, fields, strict=True)} | {
        "mechanism": CONFIG
    }


def test_the_mean_view_shows_the_estimate_and_the_truth() -> None:
    stored = campaign(CONFIG)
    values = rng().uniform(2.0, 6.0, N)
    reports = stored.mechanism.perturb(values, rng=rng(1))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=values, document=_document)
    raw = seen.estimate
    assert abs(raw.mean - 4.0) < 5 * raw.std_errors  # the seeded estimate is the mean's
    assert seen.cells("mean") == [fmt_number(float(raw.mean))]
    assert seen.cells("95% interval") == [
        f"[{fmt_number(float(raw.ci_low))}, {fmt_number(float(raw.ci_high))}]"
    ]
    assert seen.cells("truth") == [fmt_number(float(np.mean(values)))]
    assert "<h2>2. The central gap</h2>" in seen.html
    chart = seen.display["chart"]
    assert chart["type"] == "interval-points" and chart["labels"] == ["mean"]
    assert chart["values"] == [raw.mean] and chart["range"] == [0, 10]
    assert seen.display["table"]["rows"][0][1:] == [
        raw.mean,
        raw.std_errors,
        raw.ci_low,
        raw.ci_high,
    ]

    without = see(REPORT, DASHBOARD, stored, reports, document=_document)
    assert "<th>truth</th>" not in without.html and "<th>truth</th>" in seen.html
