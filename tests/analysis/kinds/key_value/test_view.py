"""The key-value kind's views on a small seeded PCKV campaign: each key's frequency and mean
with their intervals, in the report and on the dashboard."""

from __future__ import annotations

from analysis.kinds.key_value.view import DASHBOARD, REPORT
from analysis.views.cells import fixed, interval
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 2}
LABELS = ["<k0>", "k1", "k2", "k3"]


def test_the_key_value_view_shows_frequencies_and_means() -> None:
    stored = campaign(CONFIG, domain=LABELS)
    generator = rng()
    keys = generator.integers(0, 4, N)
    records = [{int(k): float(0.5 * k - 0.75)} for k in keys]
    reports = stored.mechanism.perturb(records, rng=rng(7))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=records)
    entries = seen.data["keys"]
    assert seen.cells("key") == ["&lt;k0&gt;", "k1", "k2", "k3"]
    assert seen.cells("frequency") == [fixed(e["frequency"]) for e in entries]
    assert seen.cells("95% interval") == [interval(*e["frequency_ci"]) for e in entries]
    assert seen.cells("mean") == [fixed(e["mean"]) for e in entries]
    assert seen.cells("true mean") == [fixed(0.5 * k - 0.75) for k in range(4)]
    display = seen.display
    assert display["chart"]["values"] == [e["frequency"] for e in seen.document["keys"]]
    assert display["sections"][0]["chart"]["range"] == [-1.0, 1.0]
    assert display["table"]["columns"][0] == "key"

    without = see(REPORT, DASHBOARD, stored, reports)
    assert "<th>true frequency</th>" not in without.html
