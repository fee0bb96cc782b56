"""``ldp-collector``: init-db, campaign create, and serve's refusal to start without a token.
(Serving itself runs under gunicorn in tests/e2e.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.cli import ACCESS_LOG_FORMAT, main
from collector.storage import SCHEMA_VERSION, Storage
from tests.collector.conftest import CAMPAIGN


def test_init_db_creates_and_migrates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "c.db"
    assert main(["init-db", "--db", str(db)]) == 0
    assert f"schema version {SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["init-db", "--db", str(db)]) == 0  # idempotent
    with Storage(db, create=False) as storage:
        assert storage.list_campaigns() == []


def test_campaign_create_is_direct_idempotent_and_refuses_conflicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, spec = tmp_path / "c.db", tmp_path / "campaign.json"
    spec.write_text(json.dumps(CAMPAIGN))
    assert main(["campaign", "create", "--file", str(spec), "--db", str(db)]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["name"] == "colors" and len(document["config_id"]) == 32
    assert "created" in captured.err
    assert main(["campaign", "create", "--file", str(spec), "--db", str(db)]) == 0
    assert "already exists" in capsys.readouterr().err
    spec.write_text(json.dumps(dict(CAMPAIGN, min_batch_size=5)))
    assert main(["campaign", "create", "--file", str(spec), "--db", str(db)]) == 3
    assert "immutable" in capsys.readouterr().err
    spec.write_text("{not json")
    assert main(["campaign", "create", "--file", str(spec), "--db", str(db)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    spec.write_text(json.dumps(dict(CAMPAIGN, name="other", domain=["a"])))
    assert main(["campaign", "create", "--file", str(spec), "--db", str(db)]) == 2
    assert "domain must have k=5 labels" in capsys.readouterr().err
    with Storage(db, create=False) as storage:
        assert [c.name for c in storage.list_campaigns()] == ["colors"]


@pytest.mark.parametrize("token", [None, "", "short"])
def test_serve_refuses_to_start_without_an_admin_token(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    token: str | None,
) -> None:
    if token is None:
        monkeypatch.delenv("LDP_ADMIN_TOKEN", raising=False)
    else:
        monkeypatch.setenv("LDP_ADMIN_TOKEN", token)
    assert main(["serve", "--db", str(tmp_path / "c.db"), "--port", "0"]) == 2
    assert "refusing to start: set LDP_ADMIN_TOKEN" in capsys.readouterr().err
    assert not (tmp_path / "c.db").exists()


def test_serve_validates_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LDP_ADMIN_TOKEN", "x" * 32)
    assert main(["serve", "--db", str(tmp_path / "c.db"), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_access_log_format_carries_no_client_address_agent_or_time() -> None:
    for atom in ("%(h)s", "%(a)s", "%(t)s", "%({x-forwarded-for}i)s", "%(u)s"):
        assert atom not in ACCESS_LOG_FORMAT
