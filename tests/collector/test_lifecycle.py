"""Campaign metadata and expiry (issue 27, item 2): metadata is validated naming the field,
stored and served, and leaves ``config_id`` unchanged; a real collector past a campaign's
``expires`` day (its clock set by ``LDP_TODAY``) refuses uploads with ``campaign-expired``
(410), which a real SDK client stops on, counting what it dropped; estimates stay available."""

from __future__ import annotations

import datetime
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient

from analysis.demo import main as demo
from client_sdk import TelemetryClient
from client_sdk.campaign import parse_campaign
from client_sdk.policy import DEFAULT_POLICY
from client_sdk.protocol import PROBLEM_TYPES
from collector.cli import main as collector_cli
from collector.process import CollectorProcess
from collector.storage import Storage

BASE = {
    "name": "theme",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
    "domain": ["light", "dark", "system"],
    "policy": {"epsilon_per_report": 1.0, "reports_per_period": 100, "period_seconds": 86400},
    "min_batch_size": 5,
}
METADATA = {
    "description": "the theme the app shows",
    "unit": "devices",
    "owner": "ui-team@example.org",
    "expires": "2027-01-10",
    "retention_days": 30,
}


def test_metadata_leaves_config_id_unchanged_and_is_served(client: FlaskClient) -> None:
    plain = parse_campaign(BASE)
    for field, value in METADATA.items():
        assert parse_campaign({**BASE, field: value}).config_id == plain.config_id, field
    headers = {"Authorization": f"Bearer {client.application.config['ADMIN_TOKEN']}"}
    created = client.post("/v1/campaigns", json={**BASE, **METADATA}, headers=headers)
    assert created.status_code == 201, created.get_json()
    served = client.get("/v1/campaigns/theme").get_json()
    assert served["config_id"] == plain.config_id
    assert {field: served[field] for field in METADATA} == METADATA
    # The same document again is idempotent; other metadata under the name is a conflict.
    again = client.post("/v1/campaigns", json={**BASE, **METADATA}, headers=headers)
    assert again.status_code == 200
    other = client.post("/v1/campaigns", json={**BASE, **METADATA, "unit": "ms"}, headers=headers)
    assert other.status_code == 409
    assert other.get_json()["type"] == PROBLEM_TYPES["campaign-conflict"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("description", "", "description must be non-empty text"),
        ("unit", 3, "unit must be non-empty text of at most 1000 characters; got 3"),
        ("owner", "x" * 1001, "owner must be non-empty text"),
        ("expires", "31/01/2027", "expires must be an ISO date YYYY-MM-DD; got '31/01/2027'"),
        ("expires", "2027-02-30", "expires is not a calendar date; got '2027-02-30'"),
        ("retention_days", 0, "retention_days"),
        ("retention_days", 1.5, "retention_days"),
    ],
)
def test_bad_metadata_is_a_400_naming_the_field(
    client: FlaskClient, field: str, value: Any, message: str
) -> None:
    headers = {"Authorization": f"Bearer {client.application.config['ADMIN_TOKEN']}"}
    response = client.post("/v1/campaigns", json={**BASE, field: value}, headers=headers)
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    assert message in response.get_json()["detail"]


def test_expired_campaign_refuses_uploads_and_the_sdk_stops(tmp_path: Path) -> None:
    collector = CollectorProcess(tmp_path / "c.db", workers=1, log_dir=tmp_path)
    collector.env["LDP_TODAY"] = "2027-01-10"  # the last day the campaign takes reports
    with collector:
        collector.create_campaign({**BASE, **METADATA})
        with TelemetryClient(collector.url, state_dir=tmp_path / "device") as device:
            for _ in range(6):
                assert device.record("theme", "dark") is not None
            assert device.flush() == 6

            collector.env["LDP_TODAY"] = "2027-01-11"
            collector.restart()
            device.record("theme", "light")  # queued: the device does not read "expires"
            device.record("theme", "dark")
            assert device.flush() == 0
            assert device.pending() == 0
            status = device.status()
            assert status["ended_campaigns"] == {"theme": "campaign-expired"}
            assert status["dropped"] == {"theme": {"campaign-expired": 2}}
            assert device.record("theme", "dark") is None  # records nothing more
            assert device.status()["dropped"] == {"theme": {"campaign-expired": 3}}
            assert device.pending() == 0  # so nothing is ever retried
            assert any("campaign-expired" in (e.event or "") for e in device.privacy_log("theme"))

        config_id = parse_campaign(BASE).config_id
        refused = requests.post(
            f"{collector.url}/v1/campaigns/theme/reports",
            json={"config_id": config_id, "reports": []},
            timeout=30,
        )
        assert refused.status_code == 410
        assert refused.headers["Content-Type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["type"] == PROBLEM_TYPES["campaign-expired"]
        assert problem["expires"] == "2027-01-10"

        estimate = requests.get(
            f"{collector.url}/v1/campaigns/theme/estimate", headers=collector.admin(), timeout=30
        )
        assert estimate.status_code == 200, estimate.text
        assert estimate.json()["n"] == 6


def test_an_epsilon_above_the_default_policy_warns(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "c.db"
    strong = {**BASE, "name": "strong"}
    weak = {
        **BASE,
        "name": "weak",
        "mechanism": {"mechanism": "grr", "epsilon": 10.0, "k": 3},
        "policy": {**BASE["policy"], "epsilon_per_report": 10.0},  # type: ignore[dict-item]
    }
    assert collector_cli(["init-db", "--db", str(db)]) == 0
    for document in (strong, weak):
        (tmp_path / f"{document['name']}.json").write_text(json.dumps(document))
    capsys.readouterr()
    assert (
        collector_cli(
            ["campaign", "create", "--db", str(db), "--file", str(tmp_path / "strong.json")]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err
    assert (
        collector_cli(
            ["campaign", "create", "--db", str(db), "--file", str(tmp_path / "weak.json")]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "warning: devices with the SDK's default PrivacyPolicy will refuse this campaign" in err
    assert (
        f"max_epsilon is 10.0 in the campaign, the policy allows {DEFAULT_POLICY.max_epsilon!r}"
        in err
    )

    with CollectorProcess(tmp_path / "http.db", workers=1, log_dir=tmp_path) as process:
        created = process.create_campaign(weak)
        assert len(created["warnings"]) == 1 and "max_epsilon" in created["warnings"][0]
        assert "warnings" not in process.create_campaign(strong)


def test_delete_is_refused_while_reports_remain_unless_with_reports(
    tmp_path: Path, capsys: Any
) -> None:
    with CollectorProcess(tmp_path / "c.db", workers=1, log_dir=tmp_path) as process:
        for name in ("kept", "empty"):
            process.create_campaign({**BASE, "name": name})
        with TelemetryClient(process.url, state_dir=tmp_path / "device") as device:
            for _ in range(7):
                device.record("kept", "dark")
            assert device.flush() == 7
        url = f"{process.url}/v1/campaigns"
        assert requests.delete(f"{url}/kept", timeout=30).status_code == 401
        refused = requests.delete(f"{url}/kept", headers=process.admin(), timeout=30)
        assert refused.status_code == 409
        assert refused.json()["type"] == PROBLEM_TYPES["campaign-not-empty"]
        assert refused.json()["reports"] == 7 and "7 stored reports" in refused.json()["detail"]
        emptied = requests.delete(f"{url}/empty", headers=process.admin(), timeout=30)
        assert emptied.json() == {"deleted": "empty", "reports": 0}
        assert requests.get(f"{url}/empty", timeout=30).status_code == 404

    db = str(tmp_path / "c.db")
    capsys.readouterr()
    assert collector_cli(["campaign", "delete", "--db", db, "--name", "kept"]) == 2
    assert "campaign 'kept' still has 7 stored reports" in capsys.readouterr().err
    assert (
        collector_cli(["campaign", "delete", "--db", db, "--name", "kept", "--with-reports"]) == 0
    )
    assert "campaign 'kept' deleted with its 7 stored reports" in capsys.readouterr().out
    assert collector_cli(["campaign", "list", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == []
    # The name is free again, for a new campaign.
    assert collector_cli(["campaign", "delete", "--db", db, "--name", "kept"]) == 2
    assert "no campaign named 'kept'" in capsys.readouterr().err


def test_demo_says_how_many_it_sends_above_the_policy(tmp_path: Path, capsys: Any) -> None:
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400}
    with CollectorProcess(tmp_path / "c.db", workers=1, log_dir=tmp_path) as process:
        process.create_campaign({**BASE, "policy": policy})
        assert demo(["--collector", process.url, "--campaign", "theme", "--devices", "10",
                     "--reports-per-device", "9"]) == 0  # fmt: skip
        err = capsys.readouterr().err
        assert (
            "--reports-per-device 9 is above the policy.reports_per_period 4 of campaign "
            "'theme' (what a device's ledger allows per period): "
            "each device sends 4, 40 reports in all"
        ) in err
        assert demo(["--collector", process.url, "--campaign", "theme", "--devices", "10",
                     "--reports-per-device", "4"]) == 0  # fmt: skip
        assert "above" not in capsys.readouterr().err
        answer = requests.get(
            f"{process.url}/v1/campaigns/theme/estimate", headers=process.admin(), timeout=30
        )
        assert answer.json()["n"] == 80


def test_retention_cleanup_deletes_old_raw_reports_and_keeps_the_counts(
    tmp_path: Path, capsys: Any
) -> None:
    db = tmp_path / "c.db"
    with Storage(str(db)) as storage:
        storage.create_campaign({**BASE, "name": "window", "retention_days": 2})
        storage.create_campaign({**BASE, "name": "forever"})
        for day in ("2027-01-08", "2027-01-09", "2027-01-10"):
            rows = [(secrets.token_hex(16), "0") for _ in range(3)]
            storage.insert_reports("window", rows, day=day)
            storage.insert_reports("forever", rows, day=day)
    assert collector_cli(["campaign", "cleanup", "--db", str(db), "--today", "2027-01-10"]) == 0
    assert "campaign 'window': deleted 3 reports past its retention" in capsys.readouterr().out
    with Storage(str(db)) as storage:
        assert storage.report_days("window") == [("2027-01-09", 3), ("2027-01-10", 3)]
        assert storage.count_reports("forever") == 9
        assert storage.apply_retention(datetime.date(2027, 1, 10)) == {"window": 0}

    with CollectorProcess(db, workers=1, log_dir=tmp_path, create=False) as process:
        metrics = requests.get(f"{process.url}/metrics", timeout=30).text
        assert 'ldp_collector_retention_deleted_reports_total{campaign="window"} 3.0' in metrics
        assert 'ldp_reports_accepted_total{campaign="window"} 9.0' in metrics  # kept
        estimate = requests.get(
            f"{process.url}/v1/campaigns/window/estimate", headers=process.admin(), timeout=30
        )
        assert estimate.json()["n"] == 6  # the retained window only
