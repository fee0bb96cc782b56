"""One status vocabulary (issue 27, item 5): a campaign's ``status`` is ``open``, ``closed`` or
``expired`` in ``ldp-collector campaign list``/``show``, the collector's HTTP document and the
dashboard; whether an estimate is shown is ``estimate_status`` ``released``/``withheld``. The
old dashboard word for a withheld estimate (``collecting``) is gone from every output."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from analysis.dashboard import create_app
from analysis.dashboard.app import ESTIMATE_STATUSES
from collector import create_app as collector_app
from collector.cli import main as collector_cli
from collector.storage import CAMPAIGN_STATUSES, Storage
from tests.analysis.dashboard.conftest import COLORS, SMALL, TOKEN, sign_in, store

ROOT = Path(__file__).resolve().parents[3]
EXPIRING = {**COLORS, "name": "expiring", "expires": "2026-12-01"}


def _listed(capsys: pytest.CaptureFixture[str], db: Path) -> dict[str, str]:
    capsys.readouterr()
    assert collector_cli(["campaign", "list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    return {line.split()[0]: line.split()[header.index("status")] for line in lines[1:]}


def _shown(capsys: pytest.CaptureFixture[str], db: Path, name: str) -> Any:
    capsys.readouterr()
    assert collector_cli(["campaign", "show", "--db", str(db), "--name", name]) == 0
    return json.loads(capsys.readouterr().out)["status"]


@pytest.mark.parametrize(("today", "expiring"), [("2026-12-01", "open"), ("2026-12-02", "expired")])
def test_every_output_says_the_same_status(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    today: str,
    expiring: str,
) -> None:
    monkeypatch.setenv("LDP_TODAY", today)
    db = tmp_path / "collector.db"
    store(db, COLORS, 300, seed=1)
    store(db, SMALL, 40, seed=2)
    store(db, EXPIRING, 200, seed=3)
    with Storage(db) as storage:
        storage.close_campaign("small")
    expected = {"colors": "open", "small": "closed", "expiring": expiring}

    assert _listed(capsys, db) == expected
    assert {name: _shown(capsys, db, name) for name in expected} == expected
    served = collector_app({"DB": str(db), "ADMIN_TOKEN": TOKEN, "TODAY": today}).test_client()
    http = {c["name"]: c["status"] for c in served.get("/v1/campaigns").get_json()["campaigns"]}
    assert http == expected
    with create_app(db, TOKEN).test_client() as dashboard:
        assert sign_in(dashboard).status_code == 303
        listed = dashboard.get("/api/campaigns").get_json()["campaigns"]
        assert {c["name"]: c["status"] for c in listed} == expected
        estimates = {c["name"]: c["estimate_status"] for c in listed}
        assert estimates == {"colors": "released", "small": "withheld", "expiring": "released"}
        page = dashboard.get("/api/campaigns/small").get_json()
        assert (page["status"], page["estimate_status"]) == ("closed", "withheld")
    assert set(expected.values()) <= set(CAMPAIGN_STATUSES)


# The places a person reads a status: the dashboard (server, script, pages), the views, the
# collector's and the analysis commands, and the docs that define the words.
STATUS_FILES = [
    *sorted((ROOT / "analysis" / "dashboard").rglob("*.py")),
    *sorted((ROOT / "analysis" / "dashboard" / "templates").glob("*.html")),
    ROOT / "analysis" / "dashboard" / "static" / "dashboard.js",
    ROOT / "analysis" / "dashboard" / "static" / "dashboard.css",
    *sorted((ROOT / "analysis" / "views").glob("*.py")),
    *sorted((ROOT / "analysis" / "commands").glob("*.py")),
    ROOT / "collector" / "cli.py",
    ROOT / "collector" / "api.py",
    ROOT / "collector" / "openapi.json",
    ROOT / "docs" / "collector.md",
]


@pytest.mark.parametrize("path", STATUS_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_output_uses_the_old_status_words(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # "collecting" was the dashboard's word for an estimate still withheld.
    assert not re.search(r"\bcollecting\b", text, re.IGNORECASE), path
    # A status is never computed from closed_at alone (an expired campaign is not open).
    assert not re.search(r"closed[\"'] if [\w.]*closed", text), path


def test_the_words_are_documented() -> None:
    glossary = (ROOT / "docs" / "collector.md").read_text(encoding="utf-8")
    section = glossary[glossary.index("## Status words") :]
    for word in (*CAMPAIGN_STATUSES, *ESTIMATE_STATUSES):
        assert f"`{word}`" in section, word
