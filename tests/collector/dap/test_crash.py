"""SIGKILL of either aggregator at the worst moments, with real processes; no report is lost
or counted twice. The Leader: after the Helper answered an aggregation job but before the
Leader stored the result, and after the Helper answered its aggregate share but before the
Leader stored the collection. The Helper: while it answers an aggregation job or an aggregate
share, before it committed (its database write lock held by the test, so it cannot) and after
(its answer stored, then lost with it). A proxy between the Leader and the Helper lets each
kill land exactly there."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from analysis.dap_collect import decode_result
from client_sdk.dap.messages import CollectionJobReq, CollectionJobResp, Interval, Query
from collector.dap.cli import read_key
from collector.dap.task import b64encode
from collector.process import CollectorProcess, entry_point
from collector.storage import Storage
from tests.collector.dap.conftest import (
    COLLECTOR_TOKEN,
    TIME_PRECISION,
    DapPair,
    DapServers,
    _in_process,
    add_task,
    start_servers,
)


class HoldingProxy:
    """Forwards every request to ``target``. The first request whose path contains
    :attr:`hold` sets :attr:`forwarding` as it arrives and, once the target has answered,
    :attr:`answered`; its answer then waits until :attr:`release` is set (the caller or the
    target is killed meanwhile) and, with :attr:`drop`, is never relayed. A target that dies
    under a request gets the connection closed without an answer, as a dead peer would.
    :attr:`requests` records every ``(method, path, body)``."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.hold = ""
        self.drop = False
        self.forwarding = threading.Event()
        self.answered = threading.Event()
        self.release = threading.Event()
        self.requests: list[tuple[str, str, bytes]] = []
        lock = threading.Lock()
        proxy = self

        def take_hold(path: str) -> bool:
            with lock:
                held = bool(proxy.hold) and proxy.hold in path
                if held:
                    proxy.hold = ""
                return held

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.requests.append((self.command, self.path, body))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                held = take_hold(self.path)
                if held:
                    proxy.forwarding.set()
                try:
                    answer = requests.request(
                        self.command,
                        proxy.target + self.path,
                        data=body,
                        headers=headers,
                        timeout=120,
                    )
                except requests.RequestException:
                    self.close_connection = True  # the target died: no answer at all
                    return
                if held:
                    proxy.answered.set()
                    proxy.release.wait(120)
                    if proxy.drop:
                        self.close_connection = True
                        return
                try:
                    self.send_response(answer.status_code)
                    for name in ("Content-Type", "Retry-After"):
                        if name in answer.headers:
                            self.send_header(name, answer.headers[name])
                    self.send_header("Content-Length", str(len(answer.content)))
                    self.end_headers()
                    self.wfile.write(answer.content)
                except OSError:
                    pass  # the caller was killed meanwhile

            do_GET = do_PUT = do_POST = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


COUNT = {"type": "count"}


@pytest.fixture
def proxied(dap_servers: DapServers) -> Iterator[tuple[DapPair, HoldingProxy]]:
    """A task on the shared pair whose Helper endpoint is a holding proxy (a Helper a test
    killed is brought back, same port and database, before and after)."""
    _revive(dap_servers.helper)
    proxy = HoldingProxy(f"{dap_servers.helper.url}/dap")
    try:
        yield (
            add_task(dap_servers, COUNT, min_batch_size=5, dp="none", helper_url=f"{proxy.url}/"),
            proxy,
        )
    finally:
        proxy.close()
        _revive(dap_servers.helper)


def _revive(server: CollectorProcess) -> None:
    if server.process is None or server.process.poll() is not None:
        server.start()


def job_states(pair: DapPair) -> list[str]:
    with Storage(pair.leader.db, create=False) as storage:
        rows = storage.db.conn.execute(
            "SELECT state FROM dap_jobs WHERE task_id = ?", [pair.spec.task_id_text]
        ).fetchall()
    return [r[0] for r in rows]


def test_driver_killed_after_the_helper_answered_a_job(
    proxied: tuple[DapPair, HoldingProxy],
) -> None:
    pair, proxy = proxied
    pair.upload_measurements([True] * 7 + [False] * 5)
    proxy.hold = "/aggregation_jobs/"
    driver = subprocess.Popen(
        [*entry_point("ldp-collector", "collector.cli"), "dap", "drive", "--db", pair.leader.db,
         f"--task-id={pair.spec.task_id_text}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proxy.answered.wait(120), "the Helper never answered the job"
        driver.kill()  # SIGKILL: the Helper has aggregated, the Leader stored nothing yet
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
    proxy.hold = ""
    proxy.release.set()
    assert job_states(pair) == ["sent"]  # recorded before sending, unfinished
    # The next run re-sends the same job; the Helper answers from its record.
    assert pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}
    assert job_states(pair) == ["done"]
    done = pair.collect()
    assert done.returncode == 0, done.stderr  # the Helper's count and checksum match
    assert '"estimate": 7' in done.stdout and '"report_count": 12' in done.stdout


def test_leader_killed_after_the_helper_answered_its_aggregate_share(tmp_path: Path) -> None:
    servers = start_servers(tmp_path)
    proxy = HoldingProxy(f"{servers.helper.url}/dap")
    try:
        pair = add_task(servers, COUNT, min_batch_size=5, dp="none", helper_url=f"{proxy.url}/")
        pair.upload_measurements([True] * 7 + [False] * 5)
        assert pair.drive()["aggregated"] == 12
        unit = int(time.time()) // TIME_PRECISION
        req = CollectionJobReq(Query.time_interval(Interval(unit - 1, 3)))
        url = (
            f"{pair.leader_dap}/tasks/{pair.spec.task_id_text}/collection_jobs/"
            f"{b64encode(os.urandom(16))}"
        )
        headers = {"Authorization": f"Bearer {COLLECTOR_TOKEN}"}
        media = {**headers, "Content-Type": req.MEDIA_TYPE}
        assert requests.put(url, data=req.encode(), headers=media, timeout=30).status_code == 201
        proxy.hold = "/aggregate_shares"
        poll = threading.Thread(target=_poll_quietly, args=(url, headers), daemon=True)
        poll.start()
        assert proxy.answered.wait(120), "the Helper never answered the aggregate share"
        servers.leader.kill()  # SIGKILL of master and worker, mid-request
        proxy.hold = ""
        proxy.release.set()
        poll.join(60)
        servers.leader.start()  # same port, same database
        answer = requests.get(url, headers=headers, timeout=120)
        assert answer.status_code == 200, answer.text
        _config, private_key = read_key(str(pair.collector_key))
        result = decode_result(
            pair.spec, CollectionJobResp.decode(answer.content), req, private_key
        )
        assert (result["estimate"], result["report_count"]) == (7, 12)
        with Storage(servers.helper.db, create=False) as storage:
            shares = storage.db.conn.execute(
                "SELECT count(*) FROM dap_collections WHERE task_id = ?",
                [pair.spec.task_id_text],
            ).fetchone()[0]
        assert shares == 1  # the Helper answered the repeated request from its record
    finally:
        proxy.close()
        servers.stop()


def _poll_quietly(url: str, headers: dict[str, str]) -> None:
    with contextlib.suppress(requests.RequestException):  # the Leader dies under it
        requests.get(url, headers=headers, timeout=120)


# -- the Helper killed


@contextlib.contextmanager
def write_locked(db: str | Path) -> Iterator[None]:
    """Hold ``db``'s write lock: a writer elsewhere waits for it (up to its busy timeout)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def kill_when(
    event: threading.Event,
    server: CollectorProcess,
    *,
    delay: float = 0.0,
    release: threading.Event | None = None,
) -> None:
    """In a thread: once ``event`` is set, wait ``delay`` seconds, SIGKILL ``server``, then
    set ``release``."""

    def kill() -> None:
        if event.wait(120):
            time.sleep(delay)
            server.kill()
        if release is not None:
            release.set()

    threading.Thread(target=kill, daemon=True).start()


def drive_fails(pair: DapPair) -> str:
    """``ldp-collector dap drive`` with the Helper dying under it: exit 2; its error."""
    args = ["dap", "drive", "--db", str(pair.leader.db), f"--task-id={pair.spec.task_id_text}"]
    done = _in_process("collector.cli", args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    return done.stderr


def helper_rows(pair: DapPair) -> dict[str, int]:
    """What the Helper holds of the task: jobs, report ids, reports in its buckets, answered
    aggregate shares."""
    tid = pair.spec.task_id_text
    with Storage(pair.helper.db, create=False) as storage:
        conn = storage.db.conn
        return {
            name: int(conn.execute(sql, [tid]).fetchone()[0] or 0)
            for name, sql in (
                ("jobs", "SELECT count(*) FROM dap_jobs WHERE task_id = ?"),
                ("ids", "SELECT count(*) FROM dap_reports WHERE task_id = ?"),
                ("bucketed", "SELECT sum(report_count) FROM dap_buckets WHERE task_id = ?"),
                ("shares", "SELECT count(*) FROM dap_collections WHERE task_id = ?"),
            )
        }


def collected(pair: DapPair) -> tuple[int, int]:
    """``ldp-analyze collect``'s estimate and report count (it must succeed)."""
    done = pair.collect()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return result["estimate"], result["report_count"]


def test_helper_killed_before_committing_a_job(
    proxied: tuple[DapPair, HoldingProxy], dap_servers: DapServers
) -> None:
    pair, proxy = proxied
    pair.upload_measurements([True] * 7 + [False] * 5)
    proxy.hold = "/aggregation_jobs/"
    with write_locked(pair.helper.db):  # the Helper receives the job but cannot commit it
        kill_when(proxy.forwarding, dap_servers.helper, delay=0.5)
        assert "error" in drive_fails(pair)
    assert job_states(pair) == ["sent"]
    assert helper_rows(pair) == {"jobs": 0, "ids": 0, "bucketed": 0, "shares": 0}
    dap_servers.helper.start()  # same port, same database
    assert pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}
    assert collected(pair) == (7, 12)
    assert helper_rows(pair) == {"jobs": 1, "ids": 12, "bucketed": 12, "shares": 1}


def test_helper_killed_after_committing_a_job(
    proxied: tuple[DapPair, HoldingProxy], dap_servers: DapServers
) -> None:
    pair, proxy = proxied
    pair.upload_measurements([True] * 7 + [False] * 5)
    proxy.hold, proxy.drop = "/aggregation_jobs/", True  # the answer dies with the Helper
    kill_when(proxy.answered, dap_servers.helper, release=proxy.release)
    assert "error" in drive_fails(pair)
    assert job_states(pair) == ["sent"]
    assert helper_rows(pair) == {"jobs": 1, "ids": 12, "bucketed": 12, "shares": 0}
    dap_servers.helper.start()
    # The re-sent job gets the stored answer: the reports are not taken for replays.
    assert pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}
    assert collected(pair) == (7, 12)
    assert helper_rows(pair) == {"jobs": 1, "ids": 12, "bucketed": 12, "shares": 1}


def test_helper_killed_before_committing_its_aggregate_share(
    proxied: tuple[DapPair, HoldingProxy], dap_servers: DapServers
) -> None:
    pair, proxy = proxied
    pair.upload_measurements([True] * 7 + [False] * 5)
    assert pair.drive()["aggregated"] == 12
    proxy.hold = "/aggregate_shares"
    result: list[tuple[int, int]] = []
    with write_locked(pair.helper.db):
        collector = threading.Thread(target=lambda: result.append(collected(pair)))
        collector.start()  # the Collector polls on while the Helper is down
        assert proxy.forwarding.wait(120), "the Leader never asked for the aggregate share"
        time.sleep(0.5)
        dap_servers.helper.kill()
    assert helper_rows(pair)["shares"] == 0
    dap_servers.helper.start()
    collector.join(120)
    assert result == [(7, 12)]
    assert helper_rows(pair) == {"jobs": 1, "ids": 12, "bucketed": 12, "shares": 1}


def test_helper_killed_after_committing_its_aggregate_share(
    proxied: tuple[DapPair, HoldingProxy], dap_servers: DapServers
) -> None:
    pair, proxy = proxied
    pair.upload_measurements([True] * 7 + [False] * 5)
    assert pair.drive()["aggregated"] == 12
    proxy.hold, proxy.drop = "/aggregate_shares", True
    result: list[tuple[int, int]] = []
    collector = threading.Thread(target=lambda: result.append(collected(pair)))
    collector.start()
    assert proxy.answered.wait(120), "the Helper never answered the aggregate share"
    dap_servers.helper.kill()  # its share is stored; the answer dies with it
    proxy.release.set()
    assert helper_rows(pair)["shares"] == 1
    dap_servers.helper.start()
    collector.join(120)
    assert result == [(7, 12)]
    # The Leader asked again with the same request: answered from the record, no new share.
    # That request ran the Helper's retention first: the job of the collected batch is gone.
    assert helper_rows(pair) == {"jobs": 0, "ids": 12, "bucketed": 12, "shares": 1}
