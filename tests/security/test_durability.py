"""Acknowledged means durable: a deleted, replaced or read-only database is never acknowledged,
``/readyz`` commits a real write, and ``serve`` never creates a database silently."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from collector.process import CollectorProcess
from tests.security.conftest import StartCollector, upload

CAMPAIGN = {
    "name": "durable",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    "domain": ["a", "b"],
}
UNAVAILABLE = "urn:ldp-telemetry:problem:database-unavailable"


def reports(n: int) -> list[dict[str, object]]:
    return [{"id": secrets.token_hex(16), "payload": i % 2} for i in range(n)]


def assert_unavailable(response: requests.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["type"] == UNAVAILABLE
    assert int(response.headers["Retry-After"]) >= 1


def test_a_deleted_database_is_never_acknowledged_and_never_recreated(
    start_collector: StartCollector, tmp_path: Path
) -> None:
    collector = start_collector()
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    assert upload(collector, "durable", config_id, reports(10)).json()["accepted"] == 10

    os.remove(collector.db)  # a careless operator, while serving
    # Every worker's thread: far more uploads than connections, none acknowledged.
    for _ in range(20):
        assert_unavailable(upload(collector, "durable", config_id, reports(25)))
    assert_unavailable(requests.get(f"{collector.url}/readyz", timeout=10))
    assert requests.get(f"{collector.url}/healthz", timeout=10).status_code == 200  # alive

    collector.stop()
    collector.create = False  # what an operator restarts: plain `serve`
    with pytest.raises(RuntimeError, match="init-db"):
        collector.start()
    assert not Path(collector.db).exists()


def test_a_replaced_database_is_never_acknowledged(
    start_collector: StartCollector, tmp_path: Path
) -> None:
    collector = start_collector()
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    assert upload(collector, "durable", config_id, reports(5)).json()["accepted"] == 5
    copy = tmp_path / "restored.db"
    with (
        contextlib.closing(sqlite3.connect(collector.db)) as source,
        contextlib.closing(sqlite3.connect(copy)) as target,
    ):
        source.backup(target)
    os.replace(copy, collector.db)  # a restore from backup renamed over the live file

    assert_unavailable(upload(collector, "durable", config_id, reports(5)))
    assert_unavailable(requests.get(f"{collector.url}/readyz", timeout=10))


@contextlib.contextmanager
def read_only(path: str) -> Iterator[None]:
    """Make ``path`` unwritable even for root (``chattr +i``), or by mode for other users."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", path], capture_output=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot make a file read-only as root here: {done.stderr.decode()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", path], check=True)
    else:
        os.chmod(path, 0o444)
        try:
            yield
        finally:
            os.chmod(path, 0o644)


def test_readyz_commits_a_write_and_fails_on_a_read_only_database(
    start_collector: StartCollector,
) -> None:
    collector = start_collector(workers=1)
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    assert requests.get(f"{collector.url}/readyz", timeout=10).status_code == 200
    collector.stop()  # a clean stop checkpoints the WAL into the file
    with read_only(collector.db):
        collector.start()
        ready = requests.get(f"{collector.url}/readyz", timeout=10)
        assert_unavailable(ready)
        assert "not writable" in ready.json()["detail"]
        response = upload(collector, "durable", config_id, reports(3))
        assert response.status_code == 503  # and nothing is acknowledged either
        collector.stop()


def test_serve_refuses_to_create_a_database_unless_asked(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    env = {**os.environ, "LDP_ADMIN_TOKEN": secrets.token_urlsafe(32)}
    command = [*CollectorProcess.command(), "serve", "--db", str(db), "--port", "0"]
    refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2
    assert "init-db" in refused.stderr and "--create" in refused.stderr
    assert not db.exists()

    init = subprocess.run(
        [*CollectorProcess.command(), "init-db", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert init.returncode == 0, init.stderr
    with CollectorProcess(db, workers=1, create=False) as collector:  # init-db ran: serves
        assert requests.get(f"{collector.url}/readyz", timeout=10).status_code == 200
