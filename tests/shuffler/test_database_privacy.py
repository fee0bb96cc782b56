"""The shuffler's database holds its id-digest key and the waiting envelopes: ``init-db`` makes
it 0600 in a 0700 folder it creates, and ``serve`` refuses one other users may read unless
``--allow-readable-db`` (real ``ldp-shuffler`` processes)."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

from collector.process import entry_point
from shuffler.process import ShufflerProcess


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def shuffler(*arguments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LDP_SHUFFLER_TOKEN": secrets.token_urlsafe(32)}
    return subprocess.run(
        [*entry_point("ldp-shuffler", "shuffler.cli"), *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_init_db_makes_a_private_folder_and_file(tmp_path: Path) -> None:
    db = tmp_path / "state" / "shuffler" / "shuffler.db"
    old = os.umask(0o022)
    try:
        done = shuffler("init-db", "--db", str(db))
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert mode(db) == 0o600
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700
    assert mode(tmp_path) == stat.S_IMODE(os.stat(tmp_path).st_mode)  # not ours: untouched


def test_serve_refuses_a_readable_database_unless_allowed(tmp_path: Path) -> None:
    db = tmp_path / "shuffler.db"
    assert shuffler("init-db", "--db", str(db)).returncode == 0
    os.chmod(db, 0o640)
    refused = shuffler("serve", "--db", str(db), "--collector", "http://127.0.0.1:1", "--port", "0")
    assert refused.returncode == 2
    assert f"{db} is readable by other users (mode 0640)" in refused.stderr
    assert "--allow-readable-db" in refused.stderr

    process = ShufflerProcess(
        db, "http://127.0.0.1:1", workers=1, extra_args=["--allow-readable-db"]
    )
    process.start()  # told so explicitly: serves
    process.stop()
