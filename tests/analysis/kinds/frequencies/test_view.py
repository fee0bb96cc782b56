"""The frequencies kind's views on a small seeded OUE campaign: the report page's table of the
top items (raw and post-processed, with the truth only when given) and the dashboard's bars."""

from __future__ import annotations

import re
from typing import TypedDict

import numpy as np

from analysis import estimate
from analysis.kinds.frequencies.view import DASHBOARD, build_report, render_html
from analysis.views.cells import fixed
from tests.analysis.views.seeded import N, campaign, rng

LABELS = ["<a>", "b", "c", "d", "e", "f"]
SHARES = [0.4, 0.25, 0.15, 0.1, 0.06, 0.04]


def _column(page: str, header: str) -> list[str]:
    table = re.findall(r"<table>.*?</table>", page)[0]
    column = re.findall(r"<th>(.*?)</th>", table).index(header)
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    return [re.findall(r"<td>(.*?)</td>", row)[column] for row in rows]


class Options(TypedDict):
    """The report options both renderings share."""

    method: str
    delta: float
    neighbouring: str
    top: int
    alpha: float


def test_the_frequency_page_and_bars_show_the_estimate() -> None:
    stored = campaign({"mechanism": "oue", "epsilon": 2.0, "k": 6}, domain=LABELS)
    values = rng().choice(6, N, p=SHARES)
    raw = estimate(stored.mechanism, stored.mechanism.perturb(values, rng=rng(10)))
    counts = np.bincount(values, minlength=6)
    options = Options(method="base", delta=1e-6, neighbouring="replace", top=6, alpha=0.05)
    report = build_report(stored, raw, **options, replicates=0, seed=1, true_counts=counts)
    page = render_html(report)
    items = report.data["items"]
    assert _column(page, "value")[0] == "&lt;a&gt;"
    assert _column(page, "raw") == [fixed(item["raw_frequency"]) for item in items]
    assert _column(page, "truth") == [fixed(counts[LABELS.index(i["value"])] / N) for i in items]
    assert abs(items[0]["raw_frequency"] - 0.4) < 5 * items[0]["raw_std_error"]
    plain = render_html(build_report(stored, raw, **options, replicates=0, seed=1))
    assert "<th>truth</th>" not in plain and "<th>truth</th>" in page

    document = {"items": [{k: item[k] for k in ("value", "frequency", "ci_low", "ci_high")}
                          for item in items]}  # fmt: skip
    display = DASHBOARD.build(document, raw)
    assert display["chart"]["values"] == [item["frequency"] for item in items]
    assert display["table"]["columns"] == ["value", "frequency", "ci_low", "ci_high"]
