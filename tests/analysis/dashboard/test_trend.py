"""The campaign page's trend (issue 27, item 6) and the campaign's unit on its numbers (item 2).

The trend is ``ldp-analyze estimate --by day``'s series, charted: the same numbers, one point
per UTC day at or above ``min_batch_size``, kept up to date from per-day statistics as reports
arrive. A numeric campaign's ``unit`` titles its axes and headers, and its mean's interval is
never shown as a percentage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from analysis.cli import main
from analysis.dashboard import create_app
from analysis.views.dashboard import TREND_ITEMS
from tests.analysis.dashboard.conftest import COLORS, LATENCY, TOKEN, sign_in, store

DAYS = ["2026-11-28", "2026-11-29", "2026-11-30"]
TIMED = {**LATENCY, "name": "timed", "unit": "ms", "description": "time to first frame"}


def by_day(db: Path, campaign: str, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    argv = ["estimate", "--db", str(db), "--campaign", campaign, "--by", "day", "--format", "json"]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def days_db(tmp_path: Path) -> Path:
    db = tmp_path / "collector.db"
    for i, day in enumerate(DAYS):
        store(db, COLORS, 400 + 100 * i, seed=30 + i, day=day)
        store(db, TIMED, 300, seed=40 + i, day=day)
    store(db, COLORS, 60, seed=50, day="2026-12-01")  # below min_batch_size 100: n only
    return db


def _served(db: Path, name: str) -> Any:
    with create_app(db, TOKEN).test_client() as client:
        assert sign_in(client).status_code == 303
        return client.get(f"/api/campaigns/{name}").get_json()


def _items_by_day(series: Any) -> dict[str, dict[str, Any]]:
    return {
        entry["day"]: {item["value"]: item for item in entry["estimate"]["items"]}
        for entry in series["days"]
        if entry["estimate"] is not None
    }


def test_the_frequency_trend_is_the_by_day_command(
    days_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = _served(days_db, "colors")
    trend = served["trend"]
    expected = by_day(days_db, "colors", capsys)
    assert trend["labels"] == [*DAYS, "2026-12-01"] == [d["day"] for d in expected["days"]]
    assert trend["n"] == [400, 500, 600, 60]
    # The items followed are the largest in the whole campaign's estimate.
    ranked = sorted(served["estimate"]["items"], key=lambda item: -item["frequency"])
    assert [s["label"] for s in trend["series"]] == [i["value"] for i in ranked[:TREND_ITEMS]]
    days = _items_by_day(expected)
    for line in trend["series"]:
        for i, day in enumerate(trend["labels"]):
            if day not in days:  # below min_batch_size: a gap, no estimate
                assert (line["values"][i], line["low"][i], line["high"][i]) == (None,) * 3
                continue
            item = days[day][line["label"]]
            got = (line["values"][i], line["low"][i], line["high"][i])
            assert got == (item["frequency"], item["ci_low"], item["ci_high"])
    assert trend["percent"] is True and trend["y_title"] == "share of reports"


def test_the_trend_follows_new_reports_day_by_day(
    days_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with create_app(days_db, TOKEN).test_client() as client:
        assert sign_in(client).status_code == 303
        first = client.get("/api/campaigns/colors").get_json()["trend"]
        store(days_db, COLORS, 90, seed=51, day="2026-12-01")  # the last day reaches 150
        store(days_db, COLORS, 200, seed=52, day="2026-11-29")
        trend = client.get("/api/campaigns/colors").get_json()["trend"]
    assert first["n"] == [400, 500, 600, 60] and trend["n"] == [400, 700, 600, 150]
    days = _items_by_day(by_day(days_db, "colors", capsys))
    assert set(days) == set(trend["labels"])
    for line in trend["series"]:
        assert line["values"] == [days[day][line["label"]]["frequency"] for day in trend["labels"]]


def test_a_mean_trend_carries_the_campaigns_unit(
    days_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = _served(days_db, "timed")
    assert (served["unit"], served["description"]) == ("ms", "time to first frame")
    trend = served["trend"]
    expected = by_day(days_db, "timed", capsys)
    assert trend["labels"] == DAYS and trend["y_title"] == "mean (ms)"
    [line] = trend["series"]
    for i, entry in enumerate(expected["days"]):
        point = entry["estimate"]
        assert (line["values"][i], line["low"][i], line["high"][i]) == (
            point["mean"],
            point["ci_low"],
            point["ci_high"],
        )
    display = served["display"]
    assert display["chart"]["y_title"] == "mean (ms)"
    assert display["table"]["columns"] == [
        "coordinate",
        "mean (ms)",
        "std_error (ms)",
        "ci_low (ms)",
        "ci_high (ms)",
    ]
    series = _served(days_db, "colors")
    assert "(ms)" not in json.dumps(series["display"])  # frequencies are shares, not in a unit


def test_a_means_interval_is_never_a_percentage(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    display = client.get("/api/campaigns/latency").get_json()["display"]
    styles = dict(zip(display["table"]["columns"], display["table"]["formats"], strict=True))
    assert [styles[c]["style"] for c in ("mean", "std_error", "ci_low", "ci_high")] == ["fixed"] * 4


def test_a_withheld_campaign_has_no_trend_nor_day_counts(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    assert "trend" not in client.get("/api/campaigns/small").get_json()  # withheld
    listed = {c["name"]: c for c in client.get("/api/campaigns").get_json()["campaigns"]}
    assert listed["colors"]["days"] == {
        "days": ["2026-11-30", "2026-12-01"],
        "reports": [1500, 1000],
    }
    assert "days" not in listed["small"]  # withheld: no per-day counts
