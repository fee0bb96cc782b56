"""The range kind's views on a small seeded hierarchical-histogram campaign: its ranges and
quantiles in the report, the leaves and the cumulative frequency on the dashboard."""

from __future__ import annotations

import numpy as np

from analysis.kinds.ranges.view import DASHBOARD, REPORT
from analysis.views.cells import fixed
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16}
LABELS = [f"b{i}" for i in range(16)]


def test_the_range_view_shows_ranges_and_quantiles() -> None:
    stored = campaign(CONFIG, domain=LABELS)
    leaves = rng().integers(0, 8, N)
    reports = stored.mechanism.perturb(leaves, rng=rng(6))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=np.bincount(leaves, minlength=16))
    ranges = seen.data["ranges"]
    assert seen.cells("range [lo, hi)") == [f"[{r['lo']}, {r['hi']})" for r in ranges]
    assert seen.cells("items")[0] == "b0 to b3"
    assert seen.cells("frequency") == [fixed(r["frequency"]) for r in ranges]
    assert seen.cells("truth")[-1] == fixed(1.0)  # the whole domain
    lower_half = next(r for r in ranges if (r["lo"], r["hi"]) == (0, 8))
    assert abs(lower_half["frequency"] - 1.0) < 5 * lower_half["std_error"]
    assert seen.cells("quantile") == ["25%", "50%", "75%", "90%", "99%"]
    display = seen.display
    assert display["table"]["columns"] == ["value", "frequency", "std_error", "ci_low", "ci_high"]
    assert display["sections"][0]["title"] == "Cumulative frequency"
    assert len(display["sections"][0]["chart"]["values"]) == 16

    without = see(REPORT, DASHBOARD, stored, reports)
    assert "<th>truth</th>" not in without.html
