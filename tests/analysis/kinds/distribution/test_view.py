"""The distribution kind's views on a small seeded square-wave campaign: the statistics and
buckets of the estimate, the CDF band on the dashboard."""

from __future__ import annotations

from analysis.kinds.distribution.view import DASHBOARD, REPORT
from analysis.views.cells import fixed, interval, percentile
from tests.analysis.views.seeded import N, campaign, rng, see

CONFIG = {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0, "upper": 10, "bins": 8}


def test_the_distribution_view_shows_the_histogram_and_quantiles() -> None:
    stored = campaign(CONFIG)
    values = rng().uniform(2.0, 6.0, N)
    reports = stored.mechanism.perturb(values, rng=rng(5))
    seen = see(REPORT, DASHBOARD, stored, reports, truth=values)
    data = seen.data
    mean, quantiles = data["mean"], data["quantiles"]
    assert seen.cells("statistic") == ["mean", *(percentile(q["q"]) for q in quantiles)]
    assert seen.cells("estimate")[0] == fixed(mean["value"])
    assert seen.cells("95% interval")[0] == interval(mean["ci_low"], mean["ci_high"])
    assert seen.cells("share") == [fixed(b["frequency"]) for b in data["histogram"]]
    assert seen.cells("bucket")[0] == "[0, 1.25)"
    assert abs(mean["value"] - 4.0) < 0.5  # the seeded values' mean, within the EMS's bias
    assert "Wasserstein-1 distance of the CDFs" in seen.html
    display = seen.display
    assert display["chart"]["type"] == "band-line"  # with the estimate, the CDF leads
    assert display["sections"][0]["title"] == "Histogram"
    assert len(display["sections"][0]["chart"]["values"]) == 8

    alone = DASHBOARD.build(seen.document, None)  # a document read back: its histogram
    assert alone["chart"]["type"] == "interval-bars" and alone["sections"] == []
