"""``serve`` watches its forwarder: SIGKILL of the forwarder child while reports wait answers
``/readyz`` 503 ``forwarder-down`` (problem+json) until it is restarted, ``/metrics`` counts the
restart and shows how long the oldest report waits, the log says it, uploads are still taken,
and every report is forwarded exactly once afterwards."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
import requests

from client_sdk.protocol import PROBLEM_TYPES
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment
from tests.shuffler.test_e2e import CAMPAIGN, MIN_BATCH, _upload_sealed, _wait_for

RESTART_DELAY = 2.0


def _forwarder_pid(master: int) -> int | None:
    """The pid of the ``forward`` child of ``serve``'s process (from /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == master and b"forward" in command:
            return int(stat.parent.name)
    return None


def _metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


@pytest.mark.slow
def test_a_killed_forwarder_is_reported_restarted_and_loses_nothing(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, campaign=CAMPAIGN, restart_delay=RESTART_DELAY)
    deployment.start()
    shuffler = deployment.shuffler
    assert shuffler is not None and shuffler.process is not None
    name = CAMPAIGN["name"]
    try:
        assert requests.get(f"{shuffler.url}/readyz", timeout=10).status_code == 200
        ids = _upload_sealed(deployment, name, [i % 4 for i in range(150)], 50)  # they wait
        first = _forwarder_pid(shuffler.process.pid)
        assert first is not None
        os.kill(first, signal.SIGKILL)
        down = None
        deadline = time.monotonic() + RESTART_DELAY
        while time.monotonic() < deadline:
            answer = requests.get(f"{shuffler.url}/readyz", timeout=10)
            if answer.status_code == 503:
                down = answer
                break
            time.sleep(0.05)
        assert down is not None, "readyz never reported the outage"
        assert down.headers["Content-Type"] == "application/problem+json"
        problem = down.json()
        assert problem["type"] == PROBLEM_TYPES["forwarder-down"] and problem["restarts"] == 0
        assert "SIGKILL" in problem["detail"] or "status unknown" in problem["detail"]
        metrics = requests.get(f"{shuffler.url}/metrics", timeout=10).text
        assert _metric(metrics, "ldp_shuffler_forwarder_up") == 0
        waited = _metric(metrics, "ldp_shuffler_oldest_pending_seconds")
        assert waited is not None and waited >= 0
        # Uploads are still taken while the forwarder is down; enough to make a batch.
        ids += _upload_sealed(deployment, name, [i % 4 for i in range(100)], 50)
        assert _wait_for(
            lambda: requests.get(f"{shuffler.url}/readyz", timeout=10).status_code == 200
        )
        second = _forwarder_pid(shuffler.process.pid)
        assert second is not None and second != first
        assert _wait_for(lambda: len(stored_ids(deployment.collector.db, name)) >= len(ids))
        # Every batch acknowledged, so none is left to resend: then count them, exactly once.
        assert _wait_for(
            lambda: (
                _metric(
                    requests.get(f"{shuffler.url}/metrics", timeout=10).text,
                    "ldp_shuffler_in_flight_reports",
                )
                == 0
            )
        )
        stored = stored_ids(deployment.collector.db, name)
        assert len(stored) == len(set(stored)) == len(ids) >= MIN_BATCH
        metrics = requests.get(f"{shuffler.url}/metrics", timeout=10).text
        assert _metric(metrics, "ldp_shuffler_forwarder_restarts_total") == 1
        assert _metric(metrics, "ldp_shuffler_forwarder_up") == 1
        assert _metric(metrics, "ldp_shuffler_oldest_pending_seconds") is None  # none waits
    finally:
        deployment.stop()
    log = (tmp_path / "shuffler-1.err").read_text()
    assert f"the forwarder (pid {first})" in log and "restarting it in 2 s" in log
    assert f"the forwarder restarted (pid {second}, restart 1)" in log


def test_a_forwarder_that_keeps_exiting_is_restarted_ever_more_slowly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Delays 0.1, 0.2, 0.4 s ... (capped), the exit code in the state and the log; a stopped
    watch restarts nothing."""
    import sys

    from shuffler.storage import ShufflerStorage
    from shuffler.supervisor import ForwarderSupervisor

    db = str(tmp_path / "s.db")
    command = [sys.executable, "-c", "raise SystemExit(3)"]
    supervisor = ForwarderSupervisor(command, db, first_delay=0.1, max_delay=0.4)
    supervisor.start()
    try:
        assert _wait_for(lambda: supervisor.restarts >= 4, timeout=60)
    finally:
        supervisor.stop()
    restarts = supervisor.restarts
    time.sleep(0.6)
    assert supervisor.restarts == restarts  # stopped: no more restarts
    log = capfd.readouterr().err
    delays = re.findall(r"exited with code 3 after \S+ s; .* restarting it in (\S+) s", log)
    assert delays[:4] == ["0.1", "0.2", "0.4", "0.4"]
    with ShufflerStorage(db) as storage:
        state = storage.forwarder_state()
    assert state is not None and state.restarts in (restarts - 1, restarts)
