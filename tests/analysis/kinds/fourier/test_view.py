"""The fourier kind's views on a small seeded campaign: the one-way marginals and pairs with
their intervals in the report; the multi kind's marginal display on the dashboard."""

from __future__ import annotations

import numpy as np

from analysis.kinds.fourier.view import DASHBOARD, REPORT
from analysis.kinds.multi import view as multi
from analysis.views.cells import fixed
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {
    "mechanism": "fourier",
    "epsilon": 2.0,
    "order": 2,
    "attributes": [{"name": "wifi", "labels": ["off", "<on>"]}, {"name": "dark"}, {"name": "beta"}],
}


def test_the_fourier_view_shows_marginals_and_pairs() -> None:
    assert DASHBOARD.build is multi.DASHBOARD.build
    stored = campaign(CONFIG)
    generator = rng()
    wifi = generator.random(N) < 0.7
    bits = np.stack([wifi, wifi & (generator.random(N) < 0.6), generator.random(N) < 0.2], axis=1)
    reports = stored.mechanism.perturb(bits.astype(int), rng=rng(9))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=bits.astype(int))
    one_way = seen.data["one_way"]
    assert seen.cells("attribute") == ["wifi", "dark", "beta"]
    assert seen.cells("second value")[0] == "&lt;on&gt;"
    assert seen.cells("std error") == [fixed(e["std_errors"][1]) for e in one_way]
    assert abs(one_way[0]["frequencies"][1] - 0.7) < 0.05
    assert seen.cells("attributes") == ["wifi, dark", "wifi, beta", "dark, beta"]
    assert "the truth in brackets" in seen.html
    assert len(seen.display["sections"]) == 3  # a heatmap of each pair
