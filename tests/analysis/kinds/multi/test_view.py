"""The multi kind's views (and the marginal renderers the fourier kind shares) on a small
seeded SMP campaign: the 2-way table's cells in the report, its heatmap on the dashboard."""

from __future__ import annotations

import numpy as np

from analysis.kinds.multi.view import DASHBOARD, REPORT
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {
    "mechanism": "multi",
    "epsilon": 2.0,
    "protocol": "smp",
    "attributes": [{"name": "os", "k": 3, "labels": ["a", "<b>", "c"]}, {"name": "v", "k": 2}],
    "marginals": [["os", "v"]],
}


def test_the_marginals_view_shows_the_table() -> None:
    stored = campaign(CONFIG)
    generator = rng()
    records = np.stack(
        [generator.choice(3, N, p=[0.5, 0.3, 0.2]), generator.integers(0, 2, N)], axis=1
    )
    reports = stored.mechanism.perturb(records, rng=rng(8))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=records)
    table = seen.data["tables"][0]
    assert table["attributes"] == ["os", "v"]
    first = seen.cells("0")
    assert first[0].startswith(
        f"{table['frequencies'][0][0]:.4f} &plusmn; {table['std_errors'][0][0]:.4f}"
    )
    assert f"({table['truth'][0][0]:.4f})" in first[0]
    assert seen.cells("os \\ v") == ["a", "&lt;b&gt;", "c"]
    assert seen.cells("table")[0] == "os, v"
    assert "heatmap-0" in seen.figures
    heatmap = seen.display["sections"][0]["heatmap"]
    assert heatmap["row_name"] == "os" and heatmap["column_name"] == "v"
    assert np.allclose(heatmap["values"], seen.document["tables"][0]["frequencies"])

    without = see(REPORT, DASHBOARD, stored, reports)
    assert "<span class='no'>(" not in without.html
