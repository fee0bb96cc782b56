"""The dashboard's numbers: the same documents as ``ldp-analyze estimate``, kept up to date
incrementally, nothing but n below ``min_batch_size``, one view per kind of estimate."""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask.testing import FlaskClient

from analysis.cli import main
from analysis.dashboard import create_app
from analysis.dashboard.data import CampaignCache, estimate_document, open_read_only
from analysis.dashboard.views import render
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.rappor import RAPPOR
from collector.storage import Storage
from tests.analysis.dashboard.conftest import COLORS, sign_in, store


def estimate_command(db: Path, campaign: str, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    assert main(["estimate", "--db", str(db), "--campaign", campaign, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("campaign", ["colors", "latency"])
def test_the_api_serves_the_estimate_commands_document(
    client: FlaskClient, seeded_db: Path, campaign: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_in(client).status_code == 303
    served = client.get(f"/api/campaigns/{campaign}").get_json()
    assert served["estimate"] == estimate_command(seeded_db, campaign, capsys)
    assert (served["status"], served["estimate_status"]) == ("open", "released")
    assert served["n"] == served["estimate"]["n"]


def test_updates_are_incremental_and_equal_a_full_recomputation(
    seeded_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = CampaignCache(seeded_db)
    with open_read_only(seeded_db) as storage:
        first = cache.campaign(storage, "colors")
        assert first.n == 2500 and first.days == {"2026-11-30": 1500, "2026-12-01": 1000}
        seen = first.statistic_seq
    store(seeded_db, COLORS, 700, seed=9, day="2026-12-01")
    with open_read_only(seeded_db) as storage:
        state = cache.campaign(storage, "colors")
        assert state.statistic_seq > seen
        assert state.n == 3200 and state.days["2026-12-01"] == 1700
        assert state.statistic is not None and state.statistic.n == 3200
        # The merged statistic equals one aggregation of every stored report.
        full = state.campaign.mechanism.empty_statistic()
        for chunk in storage.iter_report_chunks("colors"):
            full = full + state.campaign.mechanism.aggregate(chunk)
        np.testing.assert_array_equal(state.statistic.counts, full.counts)
    assert state.document == estimate_command(seeded_db, "colors", capsys)


def test_below_min_batch_size_only_n_is_shown(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    served = client.get("/api/campaigns/small").get_json()
    assert served["estimate_status"] == "withheld" and served["n"] == 40
    assert served["status"] == "open"
    assert served["min_batch_size"] == 1000
    for withheld in ("estimate", "display", "series", "gap", "reports_per_day", "latest_day"):
        assert withheld not in served
    listed = {c["name"]: c for c in client.get("/api/campaigns").get_json()["campaigns"]}
    assert listed["small"]["n"] == 40 and "reports_per_day" not in listed["small"]
    assert listed["colors"]["reports_per_day"] == 1250.0
    assert listed["colors"]["latest_day"] == "2026-12-01"
    assert listed["colors"]["reports_latest_day"] == 1000
    assert listed["colors"]["mechanism"] == "grr" and listed["colors"]["epsilon"] == 2.0


def test_campaign_page_parts(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    served = client.get("/api/campaigns/colors").get_json()
    assert served["privacy"]["epsilon_per_report"] == 2.0
    assert served["privacy"]["memoized"] is False
    assert served["gap"]["available"] is True
    assert served["gap"]["variance_ratio"] > 1  # the local model costs accuracy
    assert served["series"] == {"days": ["2026-11-30", "2026-12-01"], "reports": [1500, 1000]}
    assert served["display"]["view"] == "frequencies"
    assert served["display"]["chart"]["labels"] == COLORS["domain"]
    numeric = client.get("/api/campaigns/latency").get_json()
    assert numeric["display"]["view"] == "mean"
    assert numeric["gap"]["available"] is False
    assert client.get("/api/campaigns/nope").status_code == 404
    assert client.get("/campaigns/nope").status_code == 404


def test_memoized_mechanisms_show_epsilon_inf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75}
    candidates = [f"page-{i}" for i in range(8)]
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, RAPPOR)
    values = ["page-0"] * 3000 + ["page-1"] * 2000
    reports = mechanism.simulate_clients(values, rng=np.random.default_rng(5))
    db = tmp_path / "collector.db"
    with Storage(db) as storage:
        storage.create_campaign(
            {"name": "pages", "mechanism": config, "domain": candidates, "min_batch_size": 100}
        )
        rows = [(secrets.token_hex(16), json.dumps(p)) for p in mechanism.to_wire(reports)]
        storage.insert_reports("pages", rows)
    with create_app(db, "t" * 20).test_client() as client:
        assert sign_in(client, token="t" * 20).status_code == 303
        served = client.get("/api/campaigns/pages").get_json()
    assert served["privacy"]["memoized"] is True
    assert served["privacy"]["epsilon_inf"] == pytest.approx(mechanism.epsilon_inf)
    assert served["display"]["view"] == "rappor"
    assert served["display"]["table"]["columns"][-2:] == ["selected", "significant"]
    assert served["estimate"] == estimate_command(db, "pages", capsys)


def test_views_are_chosen_by_the_estimate_kind(seeded_db: Path) -> None:
    with open_read_only(seeded_db) as storage:
        campaign = storage.get_campaign("colors")
        statistic = campaign.mechanism.empty_statistic()
        for chunk in storage.iter_report_chunks("colors"):
            statistic = statistic + campaign.mechanism.aggregate(chunk)
    document = estimate_document(campaign, statistic, confidence=0.9)
    shown = render("frequencies", document)
    assert shown["view"] == "frequencies"
    rows = shown["table"]["rows"]
    assert [r[0] for r in rows] == COLORS["domain"]
    assert [r[1] for r in rows] == [item["frequency"] for item in document["items"]]
    assert shown["chart"]["low"] == [item["ci_low"] for item in document["items"]]
    vector = {
        "mean": [1.0, 2.0],
        "std_error": [0.1, 0.2],
        "ci_low": [0.8, 1.6],
        "ci_high": [1.2, 2.4],
    }
    assert render("mean", vector)["table"]["rows"] == [
        [0, 1.0, 0.1, 0.8, 1.2],
        [1, 2.0, 0.2, 1.6, 2.4],
    ]
    with pytest.raises(ValueError, match="no dashboard view"):
        render("something", {"something": "else"})


def test_the_database_is_opened_read_only(seeded_db: Path) -> None:
    with open_read_only(seeded_db) as storage, pytest.raises(sqlite3.OperationalError):
        storage.conn.execute("DELETE FROM reports")
    with Storage(seeded_db, create=False) as storage:
        assert storage.count_reports("colors") == 2500


def test_warm_brings_every_campaign_up_to_date(seeded_db: Path) -> None:
    cache = CampaignCache(seeded_db)
    assert cache.warm() == (3, 2500 + 800 + 40)
    with open_read_only(seeded_db) as storage:
        states = {state.campaign.name: state for state in cache.campaigns(storage)}
    assert states["colors"].statistic is not None and states["colors"].statistic.n == 2500
    assert states["colors"].document is not None
    assert states["small"].document is None  # below min_batch_size: no estimate is made


def test_a_campaign_without_an_estimator_is_explained(tmp_path: Path) -> None:
    config = {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75}
    mechanism = mechanism_from_config(config)
    assert isinstance(mechanism, RAPPOR)
    reports = mechanism.simulate_clients(["x"] * 200, rng=np.random.default_rng(6))
    db = tmp_path / "collector.db"
    with Storage(db) as storage:
        storage.create_campaign({"name": "bare", "mechanism": config, "min_batch_size": 100})
        rows = [(secrets.token_hex(16), json.dumps(p)) for p in mechanism.to_wire(reports)]
        storage.insert_reports("bare", rows)
    with create_app(db, "t" * 20).test_client() as client:
        assert sign_in(client, token="t" * 20).status_code == 303
        response = client.get("/api/campaigns/bare")
    assert response.status_code == 422
    assert response.mimetype == "application/problem+json"
    assert "candidate" in response.get_json()["detail"]


def test_slow_estimates_are_remade_in_the_background(
    seeded_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = CampaignCache(seeded_db, slow_seconds=0.0)  # every estimate counts as slow
    with open_read_only(seeded_db) as storage:
        first = cache.campaign(storage, "colors")  # the first is made at once
        assert first.document is not None and first.document["n"] == 2500
    store(seeded_db, COLORS, 300, seed=12, day="2026-12-01")
    with open_read_only(seeded_db) as storage:
        state = cache.campaign(storage, "colors")
        # Answered at once: the counts are new, the estimate is the previous one (its own n).
        assert state.n == 2800
        assert state.document is not None and state.document["n"] == 2500
        assert state.display is not None and state.display["view"] == "frequencies"
    for _ in range(600):
        if not state.refreshing:
            break
        time.sleep(0.05)
    assert not state.refreshing
    assert state.document["n"] == 2800
    assert state.document == estimate_command(seeded_db, "colors", capsys)
    with open_read_only(seeded_db) as storage:
        again = cache.campaign(storage, "colors")  # nothing new: no further work
    assert again.document == state.document and not again.refreshing
