"""Bad flags are one line naming the flag, never a traceback: ``ldp-collector``, ``ldp-analyze``.

A ``--db`` that is not SQLite, lies in a missing folder or is a folder; a ``--port`` another
socket listens on; an ``--out`` that cannot be written; a campaign whose policy no report meets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from analysis.cli import main as analyze
from collector.cli import main as collector

TOKEN = "t" * 32
CAMPAIGN: dict[str, Any] = {
    "name": "theme",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
    "domain": ["light", "dark", "system"],
    "policy": {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400},
}


@pytest.fixture()
def listening() -> Iterator[int]:
    """A port another socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _refused(
    capsys: Any, command: Callable[[Sequence[str]], int], argv: list[str], *expected: str
) -> None:
    assert command(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for text in expected:
        assert text in err, err


def test_a_db_that_is_not_sqlite(tmp_path: Path, capsys: Any) -> None:
    junk = tmp_path / "notes.db"
    junk.write_text("not a database\n")
    message = f"--db {junk} is not a SQLite database"
    _refused(capsys, collector, ["init-db", "--db", str(junk)], message)
    _refused(capsys, collector, ["campaign", "create", "--db", str(junk), "--file", "-"], message)
    _refused(capsys, analyze, ["estimate", "--db", str(junk), "--campaign", "x"], message)
    _refused(
        capsys,
        analyze,
        ["report", "--db", str(junk), "--campaign", "x", "--out", str(tmp_path / "r.html")],
        message,
    )


def test_a_db_in_a_missing_folder_or_a_folder(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "no-such-folder" / "c.db"
    for argv in (["init-db", "--db", str(missing)], ["serve", "--db", str(missing)]):
        _refused(capsys, collector, argv, f"--db {missing}: the folder", "does not exist")
    _refused(capsys, analyze, ["estimate", "--db", str(missing), "--campaign", "x"], "--db")
    _refused(capsys, collector, ["init-db", "--db", str(tmp_path)], "is a folder")
    absent = tmp_path / "absent.db"
    _refused(
        capsys,
        analyze,
        ["estimate", "--db", str(absent), "--campaign", "x"],
        f"--db: no collector database at {absent}",
    )


def test_a_busy_port(tmp_path: Path, capsys: Any, listening: int, monkeypatch: Any) -> None:
    monkeypatch.setenv("LDP_ADMIN_TOKEN", TOKEN)
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    capsys.readouterr()
    busy = f"--port {listening}: cannot listen on 127.0.0.1:{listening}"
    _refused(capsys, collector, ["serve", "--db", str(db), "--port", str(listening)], busy)
    _refused(capsys, analyze, ["dashboard", "--db", str(db), "--port", str(listening)], busy)


def test_a_busy_port_from_the_installed_command(tmp_path: Path, listening: int) -> None:
    """The real console script: exit status 2 and one line, at once (no gunicorn retries)."""
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    script = Path(sys.executable).with_name("ldp-collector")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "collector.cli"]
    done = subprocess.run(
        [*command, "serve", "--db", str(db), "--port", str(listening)],
        capture_output=True,
        text=True,
        env={**os.environ, "LDP_ADMIN_TOKEN": TOKEN},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"--port {listening}" in done.stderr


def test_an_unwritable_out(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    capsys.readouterr()
    base = ["report", "--db", str(db), "--campaign", "theme"]
    missing = tmp_path / "no-such-folder" / "r.html"
    _refused(capsys, analyze, [*base, "--out", str(missing)], f"--out {missing}: the folder")
    _refused(capsys, analyze, [*base, "--out", str(tmp_path)], f"--out {tmp_path} is a folder")
    under_a_file = db / "r.html"
    _refused(capsys, analyze, [*base, "--out", str(under_a_file)], f"--out {under_a_file}")
    json_path = tmp_path / "gone" / "r.json"
    _refused(
        capsys,
        analyze,
        [*base, "--out", str(tmp_path / "r.html"), "--json", str(json_path)],
        f"--json {json_path}",
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission bits")
def test_an_out_folder_without_write_permission(tmp_path: Path, capsys: Any) -> None:
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    capsys.readouterr()
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    out = locked / "r.html"
    argv = ["report", "--db", str(db), "--campaign", "theme", "--out", str(out)]
    _refused(capsys, analyze, argv, f"--out {out}: not writable")


def test_a_policy_no_report_can_meet_is_refused_at_creation(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    db = tmp_path / "c.db"
    assert collector(["init-db", "--db", str(db)]) == 0
    capsys.readouterr()
    document = {**CAMPAIGN, "policy": {**CAMPAIGN["policy"], "epsilon_per_report": 0.5}}
    path = tmp_path / "never.json"
    path.write_text(json.dumps(document))
    _refused(
        capsys,
        collector,
        ["campaign", "create", "--db", str(db), "--file", str(path)],
        "policy.epsilon_per_report 0.5 is below the mechanism's per-report epsilon 1",
    )
    # The same refusal over HTTP: a 422 problem naming the field.
    from collector import create_app

    app = create_app({"DB": str(db), "ADMIN_TOKEN": TOKEN})
    answer = app.test_client().post(
        "/v1/campaigns", json=document, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code in (400, 422)
    assert "policy.epsilon_per_report" in answer.get_json()["detail"]
