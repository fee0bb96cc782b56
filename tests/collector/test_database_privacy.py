"""The collector's database holds the private keys that open every sealed envelope: created
0600 (its -wal and -shm too), and ``serve`` refuses one other users may read unless
``LDP_ALLOW_READABLE_DB=1`` says so (real ``ldp-collector`` processes)."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from collector.process import CollectorProcess


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def run(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "LDP_ADMIN_TOKEN": secrets.token_urlsafe(32)}
    environment.pop("LDP_ALLOW_READABLE_DB", None)
    environment.update(env or {})
    return subprocess.run(
        [*CollectorProcess.command(), *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def test_init_db_and_serve_make_private_files(tmp_path: Path) -> None:
    db = tmp_path / "collector.db"
    old = os.umask(0o022)  # the usual umask, which gave 0644 before
    try:
        assert run("init-db", "--db", str(db)).returncode == 0
        collector = CollectorProcess(db, workers=1, log_dir=tmp_path).start()
        try:
            collector.create_campaign(
                {
                    "name": "keys",
                    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
                    "domain": ["a", "b"],
                    "shuffle": {"min_batch": 200, "central_epsilon": 1.0, "delta": 1e-6},
                }
            )  # a shuffled campaign: a private key is written
            files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
            assert all(path.exists() for path in files)
            assert {path.name: mode(path) for path in files} == {p.name: 0o600 for p in files}
        finally:
            collector.stop()
    finally:
        os.umask(old)


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_serve_refuses_a_readable_database_unless_allowed(tmp_path: Path, suffix: str) -> None:
    db = tmp_path / "collector.db"
    assert run("init-db", "--db", str(db)).returncode == 0
    exposed = Path(f"{db}{suffix}")
    exposed.touch()
    os.chmod(exposed, 0o644)

    refused = run("serve", "--db", str(db), "--port", "0")
    assert refused.returncode == 2
    assert f"{exposed} is readable by other users (mode 0644)" in refused.stderr
    assert "LDP_ALLOW_READABLE_DB=1" in refused.stderr

    collector = CollectorProcess(db, workers=1, log_dir=tmp_path)
    collector.env["LDP_ALLOW_READABLE_DB"] = "1"
    collector.start()  # told so explicitly: serves
    collector.stop()
