"""The discovery kind's views (and the heavy-hitter renderers the sketch kind shares) on a
small seeded PEM campaign: the found strings with their numbers, recall only with the truth."""

from __future__ import annotations

from collections import Counter

from analysis.kinds.discovery.view import DASHBOARD, REPORT
from analysis.views.cells import fixed, mark
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "pem", "epsilon": 6.0, "max_length": 3, "step_bits": 6}
WORDS = ["ab", "cd", "ef", "gh", "ij"]


def test_the_discovery_view_shows_the_found_strings() -> None:
    stored = campaign(CONFIG)
    values = [WORDS[i] for i in rng().choice(5, 2 * N, p=[0.5, 0.25, 0.15, 0.07, 0.03])]
    reports = stored.mechanism.perturb(values, rng=rng(3))
    truth = dict(Counter(values))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=truth, top=4)
    items = seen.data["items"]
    assert items and items[0]["value"] == "ab"
    # The first table holds the significant items (the answer); the rest are disclosed below.
    shown = [item for item in items if item["significant"]] or items
    assert seen.cells("value")[: len(shown)] == [item["value"] for item in shown]
    assert seen.cells("frequency") == [fixed(item["frequency"]) for item in shown]
    assert seen.cells("significant") == [mark(item["significant"]) for item in shown]
    assert seen.cells("truth") == [fixed(truth.get(item["value"], 0) / (2 * N)) for item in shown]
    assert "Which are the top" in seen.html and "recall" in seen.figures
    display = seen.display
    assert display["chart"]["labels"][0] == "ab"
    assert display["sections"][-1]["title"] == "Reports and candidates per level"
    assert any("significant of" in note for note in display["notes"])

    without = see(REPORT, DASHBOARD, stored, reports, top=4)
    assert "<th>truth</th>" not in without.html and "Recall and precision need the truth" in (
        without.html
    )
