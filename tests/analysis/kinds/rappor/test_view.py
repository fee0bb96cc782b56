"""The RAPPOR kind's views on a small seeded campaign: the candidates' table carries the
decoder's numbers (and the truth only when given), the dashboard charts the significant ones."""

from __future__ import annotations

import numpy as np

from analysis.kinds.rappor.view import DASHBOARD, REPORT
from analysis.views.cells import fixed, mark
from client_sdk.mechanisms.rappor import RAPPOR
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75}
WORDS = ["<i>app</i>", *(f"app-{i}" for i in range(9))]


def test_the_rappor_view_shows_the_candidates() -> None:
    stored = campaign(CONFIG, domain=WORDS)
    assert isinstance(stored.mechanism, RAPPOR)
    held = rng().choice(10, N, p=[0.4, 0.2, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.02, 0.01])
    reports = stored.mechanism.simulate_clients([WORDS[i] for i in held], rng=rng(2))
    counts = np.bincount(held, minlength=10)
    truth = {w: int(c) for w, c in zip(WORDS, counts, strict=True)}
    seen = see(REPORT, DASHBOARD, stored, reports, truth=truth, candidates=WORDS, top=5)
    items = seen.data["items"]
    assert len(items) == 5 and items[0]["value"] == WORDS[0]  # the largest estimate leads
    assert seen.cells("candidate")[0] == "&lt;i&gt;app&lt;/i&gt;"
    assert seen.cells("frequency") == [fixed(item["frequency"]) for item in items]
    assert seen.cells("significant") == [mark(item["significant"]) for item in items]
    assert seen.cells("truth") == [fixed(truth[item["value"]] / N) for item in items]
    assert abs(items[0]["frequency"] - 0.4) < 5 * items[0]["std_error"]
    display = seen.display
    significant = [i for i in seen.document["items"] if i["significant"]]
    assert significant and display["chart"]["labels"] == [i["value"] for i in significant]
    assert display["table"]["columns"][:2] == ["value", "frequency"]
    assert len(display["table"]["rows"]) == len(WORDS)

    without = see(REPORT, DASHBOARD, stored, reports, candidates=WORDS, top=5)
    assert "<th>truth</th>" not in without.html
