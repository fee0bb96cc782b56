"""The sketch kind's views: the discovery kind's heavy-hitter renderers under the sketch's own
titles, on a small seeded count-sketch campaign decoded against its candidates."""

from __future__ import annotations

from analysis.kinds.discovery import view as discovery
from analysis.kinds.sketch.view import DASHBOARD, REPORT
from analysis.views.cells import fixed
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, "max_length": 8}
WORDS = ["w01", "w02", "w03", "absent"]


def test_the_sketch_view_is_the_heavy_hitters_under_its_titles() -> None:
    assert (REPORT.build, REPORT.render) == (discovery.REPORT.build, discovery.REPORT.render)
    assert DASHBOARD.build is discovery.DASHBOARD.build
    assert REPORT.title == "heavy hitters (sketch)" != discovery.REPORT.title
    assert DASHBOARD.title == "Frequent strings (count sketch)"
    stored = campaign(CONFIG, domain=WORDS)
    values = [WORDS[i] for i in rng().choice(3, N, p=[0.6, 0.3, 0.1])]
    reports = stored.mechanism.perturb(values, rng=rng(4))
    seen = see(REPORT, DASHBOARD, stored, reports, candidates=WORDS, top=4)
    items = seen.data["items"]
    assert [item["value"] for item in items][:2] == ["w01", "w02"]
    # The significant items first; the rest behind a disclosure, in a second table.
    significant = [item for item in items if item["significant"]]
    assert significant and len(significant) < len(items)
    assert seen.cells("frequency") == [fixed(item["frequency"]) for item in significant]
    assert f"<details><summary>{len(items) - len(significant)} examined but" in seen.html
    assert abs(items[0]["frequency"] - 0.6) < 5 * items[0]["std_error"]
    assert seen.display["table"]["rows"][0][0] == "w01"
