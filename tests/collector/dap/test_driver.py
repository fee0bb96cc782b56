"""The Leader's aggregation driver inside ``ldp-collector serve`` (issue 26): one worker drives a
task at a time (a database lease per task), a failing Helper is retried with backoff and never
stops the worker, and a real pair started with ``serve`` alone (no ``dap drive``) collects the
truth, each report counted once."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.dap.messages import Interval
from client_sdk.dap.upload import prepare_report
from collector.cli import main as collector_cli
from collector.dap import driver
from collector.dap.driver import DriveWorker, backoff
from collector.storage import Storage
from tests.collector.dap.conftest import DapServers, add_task, start_servers
from tests.collector.dap.inprocess import InProcessPair

HISTOGRAM = {"type": "histogram", "length": 4, "chunk_length": 2}
INTERVAL = 2.0


def _config(pair: InProcessPair, tmp: Path) -> dict[str, Any]:
    return {
        "DB": str(tmp / f"leader-{pair.spec.task_id_text[:8]}.db"),
        "BUSY_TIMEOUT": 5.0,
        "SYNCHRONOUS": "FULL",
        "DAP_DRIVE_INTERVAL": INTERVAL,
    }


def _counters(pair: InProcessPair) -> dict[str, int]:
    rows = pair.conn("leader").execute(
        "SELECT reason, value FROM dap_counters WHERE task_id = ? AND reason LIKE 'driver_%'",
        [pair.spec.task_id_text],
    )
    return dict(rows.fetchall())


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    pair = InProcessPair(tmp_path, HISTOGRAM, now=time.time())
    yield pair
    pair.close()


def test_one_worker_drives_a_task_at_a_time(pair: InProcessPair, tmp_path: Path) -> None:
    measurements = [i % 4 for i in range(30)]
    assert pair.upload(pair.reports(measurements)).status == ()
    now = [1000.0]
    sent: list[str] = []
    second: list[Any] = []

    def send(method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        sent.append(f"{method} {url.rsplit('/', 2)[-2]}")
        # While the first worker's job is with the Helper, the second worker's round.
        second.append(workers[1].run_once())
        return pair.send(method, url, body, headers)

    workers = [DriveWorker(_config(pair, tmp_path), clock=lambda: now[0], send=send)]
    workers.append(DriveWorker(_config(pair, tmp_path), clock=lambda: now[0], send=send))
    tid = pair.spec.task_id_text
    assert workers[0].run_once() == {tid: {"aggregated": 30, "rejected": 0, "jobs": 1, "failed": 0}}
    assert sent == ["PUT aggregation_jobs"]  # the job went to the Helper once
    assert second == [{}]  # the other worker found the task's lease held: no run
    # Not due again before the interval, whichever worker asks; then due, and idle.
    now[0] += INTERVAL - 0.1
    assert workers[1].run_once() == {} and workers[0].run_once() == {}
    now[0] += 0.1
    assert workers[1].run_once() == {tid: {"aggregated": 0, "rejected": 0, "jobs": 0, "failed": 0}}
    assert sent == ["PUT aggregation_jobs"]
    result = pair.collect(Interval(pair.unit() - 1, 3))
    assert result["estimate"] == [8, 8, 7, 7] and result["report_count"] == 30
    assert _counters(pair) == {driver.DRIVER_JOBS: 1}


def test_a_failing_helper_is_backed_off_and_counted(pair: InProcessPair, tmp_path: Path) -> None:
    assert pair.upload(pair.reports([0, 1, 2, 3, 3])).status == ()
    now = [5000.0]
    down = [True]

    def send(method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if down[0]:
            raise requests.ConnectionError("connection refused")
        return pair.send(method, url, body, headers)

    worker = DriveWorker(_config(pair, tmp_path), clock=lambda: now[0], send=send)
    tid = pair.spec.task_id_text
    failed = {tid: {"aggregated": 0, "rejected": 0, "jobs": 0, "failed": 1}}
    waits = []
    for failures in (1, 2, 3):
        assert worker.run_once() == failed  # logged and counted, never raised
        wait = backoff(INTERVAL, failures)
        waits.append(wait)
        now[0] += wait - 0.01
        assert worker.run_once() == {}  # backing off
        now[0] += 0.01
    assert waits == [4.0, 8.0, 16.0]
    assert _counters(pair) == {driver.DRIVER_FAILURES: 3, driver.CONSECUTIVE_FAILURES: 3}
    down[0] = False
    assert worker.run_once() == {tid: {"aggregated": 5, "rejected": 0, "jobs": 1, "failed": 0}}
    assert _counters(pair) == {driver.DRIVER_FAILURES: 3, driver.DRIVER_JOBS: 1}
    now[0] += INTERVAL  # healthy again: the plain interval
    assert worker.run_once()[tid]["failed"] == 0
    # The backoff is capped.
    assert backoff(INTERVAL, 40) == driver.MAX_BACKOFF_SECONDS
    assert backoff(0.5, 0) == 0.5


def test_a_full_run_is_due_again_at_once(pair: InProcessPair, tmp_path: Path) -> None:
    assert pair.upload(pair.reports([1] * 7)).status == ()
    with Storage(_config(pair, tmp_path)["DB"]) as storage:
        runs = [
            driver.drive_due_tasks(
                storage, "w", pair.send, now=10.0, interval=INTERVAL, job_size=3, max_jobs=2
            ),
            driver.drive_due_tasks(
                storage, "w", pair.send, now=10.0, interval=INTERVAL, job_size=3, max_jobs=2
            ),
            driver.drive_due_tasks(
                storage, "w", pair.send, now=10.0, interval=INTERVAL, job_size=3, max_jobs=2
            ),
        ]
    tid = pair.spec.task_id_text
    assert [run[tid]["jobs"] if run else None for run in runs] == [2, 1, None]
    assert sum(run[tid]["aggregated"] for run in runs if run) == 7


def test_a_long_run_keeps_its_lease_and_a_dead_workers_lease_runs_out(
    pair: InProcessPair, tmp_path: Path
) -> None:
    assert pair.upload(pair.reports([1] * 6)).status == ()
    now = [100.0]
    other: list[dict[str, Any]] = []

    def slow(method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        now[0] += 100.0  # each job takes 100 s: three outlast the lease's first 120 s
        other.append(driver.drive_due_tasks(second, "b", pair.send, now=now[0], interval=1.0))
        return pair.send(method, url, body, headers)

    db = _config(pair, tmp_path)["DB"]
    with Storage(db) as first, Storage(db) as second:
        run = driver.drive_due_tasks(
            first, "a", slow, now=now[0], interval=1.0, job_size=2, clock=lambda: now[0]
        )
        assert run[pair.spec.task_id_text]["jobs"] == 3
        assert other == [{}, {}, {}]  # renewed after each job: never taken from "a"
        # A worker that died holding the lease: the task waits until the lease runs out.
        name = driver.lease_name(pair.spec.task_id_text)
        assert first.take_lease(name, "dead", now=now[0] + 1, ttl=driver.LEASE_SECONDS)
        ends = now[0] + 1 + driver.LEASE_SECONDS
        assert driver.drive_due_tasks(second, "b", pair.send, now=ends - 1, interval=1.0) == {}
        idle = driver.drive_due_tasks(second, "b", pair.send, now=ends, interval=1.0)
        assert idle == {pair.spec.task_id_text: {"aggregated": 0, "rejected": 0, "jobs": 0,
                                                 "failed": 0}}  # fmt: skip


def test_serve_refuses_bad_driver_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "c.db"
    with Storage(str(db)) as storage:
        storage.migrate()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LDP_ADMIN_TOKEN", secrets.token_urlsafe(32))
        argv = ["serve", "--db", str(db), "--port", "0"]
        assert collector_cli([*argv, "--dap-drive-interval", "-1"]) == 2
        assert "--dap-drive-interval must be >= 0 seconds; got -1.0" in capsys.readouterr().err
        assert collector_cli([*argv, "--dap-interop", "--dap-drive-interval", "0"]) == 2
        assert "--dap-interop needs the Leader's driver" in capsys.readouterr().err
        patch.setenv("LDP_DAP_DRIVE_INTERVAL", "soon")
        assert collector_cli(argv) == 2
        assert "LDP_DAP_DRIVE_INTERVAL" in capsys.readouterr().err


# -- real processes


def _metric(url: str, name: str, **labels: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


def _wait_for(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_a_pair_started_with_serve_alone_collects_the_truth(tmp_path: Path) -> None:
    # Two Leader workers, each with a driver thread; no `dap drive` anywhere.
    servers: DapServers = start_servers(tmp_path, drive_interval=0.5, leader_workers=2)
    try:
        dap_pair = add_task(servers, HISTOGRAM, min_batch_size=10, dp="none")
        tid = dap_pair.spec.task_id_text
        measurements = [i % 4 for i in range(40)] + [2] * 6
        device = dap_pair.device_task()  # fetches both HPKE configs
        reports = [prepare_report(device, m) for m in measurements]
        servers.helper.stop()  # the Helper down: the Leader's driver fails, backs off, retries
        assert dap_pair.upload(reports[:20]).status == ()
        _wait_for(
            lambda: _metric(servers.leader.url, "ldp_dap_driver_failures_total", task=tid) >= 2,
            "two failed runs counted",
        )
        assert _metric(servers.leader.url, "ldp_dap_driver_consecutive_failures", task=tid) >= 2
        assert requests.get(f"{servers.leader.url}/healthz", timeout=10).status_code == 200
        servers.helper.start()  # the same port: the task's Helper URL holds
        for start in (20, 30, 40):  # more uploads while the driver runs
            assert dap_pair.upload(reports[start : start + 10]).status == ()
        done = dap_pair.collect()  # polls while reports wait for the driver
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        truth = Counter(measurements)
        assert result["estimate"] == [truth[b] for b in range(4)]
        assert result["report_count"] == len(measurements)  # each report counted once
        # No job reached the Helper twice: its PUTs (since its restart) are the jobs driven.
        jobs = _metric(servers.leader.url, "ldp_dap_driver_jobs_total", task=tid)
        puts = _metric(
            servers.helper.url,
            "ldp_http_requests_total",
            route="/dap/tasks/<task_id>/aggregation_jobs/<job_id>",
            method="PUT",
        )
        assert jobs >= 1 and puts == jobs
        assert _metric(servers.leader.url, "ldp_dap_driver_consecutive_failures", task=tid) == 0
        log = "".join(p.read_text() for p in tmp_path.glob("collector-*.err"))
        assert f"dap task {tid}: aggregation failed (ConnectionError" in log
    finally:
        servers.stop()
