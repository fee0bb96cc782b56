"""``ldp-collector campaign list|show|close``: a closed campaign refuses new reports with the
``campaign-closed`` problem type (410), and its estimates stay available."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from analysis.cli import main as analyze
from client_sdk import mechanism_from_config
from client_sdk.protocol import PROBLEM_TYPES
from collector import create_app
from collector.cli import main as collector

TOKEN = "c" * 32
CAMPAIGN: dict[str, Any] = {
    "name": "theme",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
    "domain": ["light", "dark", "system"],
}


def _upload(client: Any, config_id: str, n: int) -> Any:
    mechanism = mechanism_from_config(CAMPAIGN["mechanism"])
    payloads = mechanism.to_wire(mechanism.perturb(np.zeros(n, dtype=np.int64)))
    body = {
        "config_id": config_id,
        "reports": [{"id": secrets.token_hex(16), "payload": p} for p in payloads],
    }
    return client.post("/v1/campaigns/theme/reports", json=body)


def test_list_show_close(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    capsys.readouterr()
    spec = tmp_path / "theme.json"
    spec.write_text(json.dumps(CAMPAIGN))
    assert collector(["campaign", "create", "--db", str(db), "--file", str(spec)]) == 0
    config_id = json.loads(capsys.readouterr().out)["config_id"]

    client = create_app({"DB": str(db), "ADMIN_TOKEN": TOKEN}).test_client()
    assert _upload(client, config_id, 150).get_json()["accepted"] == 150

    assert collector(["campaign", "list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "mechanism", "epsilon", "reports", "min_batch", "status"]
    assert lines[1].split() == ["theme", "grr", "1", "150", "100", "open"]

    assert collector(["campaign", "close", "--db", str(db), "--name", "theme"]) == 0
    assert "campaign 'theme' closed at" in capsys.readouterr().out
    assert collector(["campaign", "close", "--db", str(db), "--name", "theme"]) == 0
    assert "was already closed" in capsys.readouterr().out

    refused = _upload(client, config_id, 5)
    assert refused.status_code == 410
    assert refused.get_json()["type"] == PROBLEM_TYPES["campaign-closed"]
    assert refused.mimetype == "application/problem+json"

    assert collector(["campaign", "show", "--db", str(db), "--name", "theme"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["reports"], shown["config_id"]) == ("closed", 150, config_id)
    assert list(shown["reports_per_day"].values()) == [150]

    # Estimates stay available: the admin route and the analysis command.
    estimate = client.get(
        "/v1/campaigns/theme/estimate", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert estimate.status_code == 200 and estimate.get_json()["n"] == 150
    assert analyze(["estimate", "--db", str(db), "--campaign", "theme"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 150

    assert collector(["campaign", "close", "--db", str(db), "--name", "nope"]) == 2
    assert "no campaign named 'nope'" in capsys.readouterr().err
