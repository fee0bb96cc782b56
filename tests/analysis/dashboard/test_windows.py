"""The dashboard's JSON endpoint takes ``?since=&until=`` (UTC days, inclusive), like
``ldp-analyze estimate --since --until`` on the same database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from analysis.cli import main
from tests.analysis.dashboard.conftest import sign_in


def _command(db: Path, capsys: pytest.CaptureFixture[str], *window: str) -> Any:
    capsys.readouterr()
    argv = ["estimate", "--db", str(db), "--campaign", "colors", "--format", "json", *window]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_a_window_serves_the_commands_estimate_of_those_days(
    client: FlaskClient, seeded_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_in(client).status_code == 303
    day = client.get("/api/campaigns/colors?since=2026-11-30&until=2026-11-30").get_json()
    assert (day["n"], day["estimate_status"], day["since"], day["until"]) == (
        1500,
        "released",
        "2026-11-30",
        "2026-11-30",
    )
    window = ["--since", "2026-11-30", "--until", "2026-11-30"]
    assert day["estimate"] == _command(seeded_db, capsys, *window)
    later = client.get("/api/campaigns/colors?since=2026-12-01").get_json()
    assert later["n"] == 1000
    assert later["estimate"] == _command(seeded_db, capsys, "--since", "2026-12-01")
    whole = client.get("/api/campaigns/colors").get_json()
    assert whole["n"] == 2500


def test_a_window_below_min_batch_size_shows_n_only(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    empty = client.get("/api/campaigns/colors?since=2026-12-02").get_json()
    assert empty == {
        "name": "colors",
        "since": "2026-12-02",
        "until": None,
        "n": 0,
        "min_batch_size": 100,
        "estimate_status": "withheld",
    }


def test_a_bad_window_is_a_problem_naming_the_parameter(client: FlaskClient) -> None:
    assert sign_in(client).status_code == 303
    bad = client.get("/api/campaigns/colors?since=2026-02-30")
    assert bad.status_code == 400 and "since must be a real day" in bad.get_json()["detail"]
    reversed_window = client.get("/api/campaigns/colors?since=2026-12-01&until=2026-11-30")
    assert reversed_window.status_code == 400
    missing = client.get("/api/campaigns/nope?since=2026-12-01")
    assert missing.status_code == 404


def test_a_window_needs_a_session(client: FlaskClient) -> None:
    answer = client.get("/api/campaigns/colors?since=2026-11-30")
    assert answer.status_code in (302, 303, 401)
