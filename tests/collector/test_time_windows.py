"""Time windows: reports keep the UTC day they arrived, and estimates read chosen days.

``?since=&until=`` on the admin estimate and ``--since/--until/--by day`` on ``ldp-analyze
estimate`` select the same reports (inclusive days), through a real SQLite database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.cli import main as analyze
from client_sdk import mechanism_from_config
from collector import create_app
from collector.storage import Storage

TOKEN = "t" * 32
CAMPAIGN: dict[str, Any] = {
    "name": "theme",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
    "domain": ["light", "dark", "system"],
    "min_batch_size": 100,
}
DAYS = {"2026-11-28": 50, "2026-11-29": 300, "2026-11-30": 400}


def _store(db: Path) -> dict[str, list[int]]:
    """Reports of known true values on three days (the values differ by day)."""
    mechanism = mechanism_from_config(CAMPAIGN["mechanism"])
    rng = np.random.default_rng(7)
    truth: dict[str, list[int]] = {}
    with Storage(db) as storage:
        storage.create_campaign(CAMPAIGN)
        for index, (day, n) in enumerate(DAYS.items()):
            values = np.full(n, index % 3)
            payloads = mechanism.to_wire(mechanism.perturb(values, rng=rng))
            rows = [(f"{index:02x}{i:030x}", json.dumps(p)) for i, p in enumerate(payloads)]
            storage.insert_reports("theme", rows, day=day)
            truth[day] = [int(v) for v in values]
    return truth


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    _store(path)
    return path


def _estimate(capsys: Any, *args: str) -> dict[str, Any]:
    assert analyze(["estimate", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_window_counts_only_those_days(db: Path, capsys: Any) -> None:
    base = ["--db", str(db), "--campaign", "theme"]
    assert _estimate(capsys, *base)["n"] == 750
    assert _estimate(capsys, *base, "--since", "2026-11-29")["n"] == 700
    assert _estimate(capsys, *base, "--until", "2026-11-29")["n"] == 350
    both = _estimate(capsys, *base, "--since", "2026-11-29", "--until", "2026-11-29")
    assert both["n"] == 300


def test_cli_by_day_series_has_a_std_error_per_day_and_hides_small_days(
    db: Path, capsys: Any
) -> None:
    series = _estimate(capsys, "--db", str(db), "--campaign", "theme", "--by", "day")
    assert [(d["day"], d["n"]) for d in series["days"]] == list(DAYS.items())
    assert series["days"][0]["estimate"] is None  # 50 < min_batch_size: n only
    exact: Any = mechanism_from_config(CAMPAIGN["mechanism"])
    for entry, true_value in zip(series["days"][1:], (1, 2), strict=True):
        items = entry["estimate"]["items"]
        frequencies = np.array([item["frequency"] for item in items])
        errors = np.array([item["std_error"] for item in items])
        truth = np.eye(3)[true_value]
        exact_se = np.sqrt(exact.variance(entry["n"], truth))
        # Each day's error bars are that day's (n reports), not the whole campaign's.
        np.testing.assert_allclose(errors, exact_se, rtol=0.25)
        assert np.all(np.abs(frequencies - truth) <= 5.5 * exact_se)


def test_cli_window_errors_name_the_flag(db: Path, capsys: Any) -> None:
    base = ["estimate", "--db", str(db), "--campaign", "theme"]
    assert analyze([*base, "--since", "2026-02-30"]) == 2
    assert "--since must be a real day" in capsys.readouterr().err
    assert analyze([*base, "--until", "yesterday"]) == 2
    assert "--until must be a day YYYY-MM-DD" in capsys.readouterr().err
    assert analyze([*base, "--since", "2026-11-30", "--until", "2026-11-29"]) == 2
    assert "--since 2026-11-30 is after --until 2026-11-29" in capsys.readouterr().err
    assert analyze([*base, "--since", "2026-11-28", "--until", "2026-11-28"]) == 2
    assert "min_batch_size" in capsys.readouterr().err


def test_admin_estimate_takes_the_same_window(db: Path, capsys: Any) -> None:
    app = create_app({"DB": str(db), "ADMIN_TOKEN": TOKEN})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = "/v1/campaigns/theme/estimate"
    whole = client.get(url, headers=headers).get_json()
    assert whole["n"] == 750 and "since" not in whole
    window = client.get(f"{url}?since=2026-11-29&until=2026-11-30", headers=headers).get_json()
    assert window["n"] == 700 and (window["since"], window["until"]) == ("2026-11-29", "2026-11-30")
    cli = _estimate(
        capsys,
        "--db",
        str(db),
        "--campaign",
        "theme",
        "--since",
        "2026-11-29",
        "--until",
        "2026-11-30",
    )
    assert [i["frequency"] for i in cli["items"]] == pytest.approx(
        [i["frequency"] for i in window["items"]], rel=1e-12
    )
    bad = client.get(f"{url}?since=2026-13-01", headers=headers)
    assert bad.status_code == 400 and "since" in bad.get_json()["detail"]
    small = client.get(f"{url}?until=2026-11-28", headers=headers)
    assert small.status_code == 422 and small.get_json()["n"] == 50
