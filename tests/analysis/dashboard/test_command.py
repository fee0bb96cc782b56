"""``ldp-analyze dashboard``: refuses to start without the admin token; serves under gunicorn."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from analysis.cli import main
from tests.analysis.dashboard.conftest import TOKEN, DashboardProcess


@pytest.mark.parametrize("token", [None, "", "too-short"])
def test_refuses_to_start_without_an_admin_token(
    seeded_db: Path,
    token: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if token is None:
        monkeypatch.delenv("LDP_ADMIN_TOKEN", raising=False)
    else:
        monkeypatch.setenv("LDP_ADMIN_TOKEN", token)
    assert main(["dashboard", "--db", str(seeded_db), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "LDP_ADMIN_TOKEN" in err and "refusing to start" in err
    assert "Traceback" not in err


def test_a_missing_database_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LDP_ADMIN_TOKEN", TOKEN)
    assert main(["dashboard", "--db", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err
    assert "--db" in err and "missing.db" in err


def test_serves_under_gunicorn(seeded_db: Path, tmp_path: Path) -> None:
    dashboard = DashboardProcess(seeded_db, TOKEN, tmp_path).start(timeout=60)
    try:
        login = requests.get(f"{dashboard.url}/login", timeout=10)
        assert login.status_code == 200
        assert login.headers["Server"].startswith("gunicorn")
        assert TOKEN not in login.text
        assert requests.get(f"{dashboard.url}/api/campaigns", timeout=10).status_code == 401
        vendored = requests.get(f"{dashboard.url}/static/vendor/chart.umd.min.js", timeout=10)
        assert vendored.status_code == 200 and "Chart.js v4" in vendored.text[:200]
        out = dashboard.log_dir / "dashboard-1.out"
        deadline = time.monotonic() + 60
        while "warm (3 campaigns, 3340 reports" not in out.read_text():
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
    finally:
        dashboard.stop()
