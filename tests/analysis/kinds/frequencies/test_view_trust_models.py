"""The frequency report's table of the three trust models beside the curator (the figures of
``analysis.kinds.frequencies.gap.trust_models`` at the campaign's epsilon and n)."""

from __future__ import annotations

import re

from analysis import estimate
from analysis.gap import GapOptions, kind_gap
from analysis.kinds.frequencies.view import TRUST_MODEL_LABELS, build_report, render_html
from analysis.views.cells import fmt_number
from tests.analysis.views.seeded import N, campaign, rng


def test_the_report_shows_the_trust_models_side_by_side() -> None:
    stored = campaign({"mechanism": "olh", "epsilon": 1.0, "k": 8})
    values = rng().integers(0, 8, N)
    raw = estimate(stored.mechanism, stored.mechanism.perturb(values, rng=rng(3)))
    report = build_report(
        stored, raw, method="base", delta=1e-6, neighbouring="replace", top=8, alpha=0.05,
        replicates=0, seed=1,
    )  # fmt: skip
    exact = kind_gap(stored.mechanism, N, GapOptions())["trust_models"]
    assert report.data["trust_models"] == exact
    page = render_html(report)
    heading = page.index("Three trust models at the same central epsilon = 1")
    section = page[heading : page.index("</table>", heading)]
    rows = re.findall(r"<tr>(.*?)</tr>", section)[1:]
    # the DAP row is followed by its discrete Gaussian alternative at the same (epsilon, delta)
    gaussian = exact["models"]["secure_aggregation"]["gaussian"]
    labels = list(TRUST_MODEL_LABELS.values())
    labels.insert(3, f"secure aggregation, discrete Gaussian (rho {fmt_number(gaussian['rho'])}, ")
    names = [re.findall(r"<td>(.*?)</td>", row)[0] for row in rows]
    assert len(names) == len(labels)
    assert all(name.startswith(label) for name, label in zip(names, labels, strict=True))
    assert "the same epsilon at delta 1e-06" in names[3]
    errors = [re.findall(r"<td>(.*?)</td>", row)[2] for row in rows]
    expected = [exact["models"][name]["std_error"] for name in TRUST_MODEL_LABELS]
    expected.insert(3, gaussian["std_error"])
    assert errors == [fmt_number(error) for error in expected]
