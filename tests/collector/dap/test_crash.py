"""SIGKILL of the Leader at the worst moments, with real processes: after the Helper answered
an aggregation job but before the Leader stored the result, and after the Helper answered its
aggregate share but before the Leader stored the collection. A proxy between the Leader and
the Helper holds the Helper's answer so the kill lands exactly there. No report is lost or
counted twice."""

from __future__ import annotations

import contextlib
import os
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
from collector.process import entry_point
from collector.storage import Storage
from tests.collector.dap.conftest import (
    COLLECTOR_TOKEN,
    TIME_PRECISION,
    DapPair,
    DapServers,
    add_task,
    start_servers,
)


class HoldingProxy:
    """Forwards every request to ``target``; for a path containing :attr:`hold`, it waits,
    once the target has answered, until :attr:`release` is set (the caller is killed then)."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.hold = ""
        self.answered = threading.Event()
        self.release = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = requests.request(
                    self.command,
                    proxy.target + self.path,
                    data=body,
                    headers=headers,
                    timeout=120,
                )
                if proxy.hold and proxy.hold in self.path:
                    proxy.answered.set()
                    proxy.release.wait(120)
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
    """A task on the shared pair whose Helper endpoint is a holding proxy."""
    proxy = HoldingProxy(f"{dap_servers.helper.url}/dap")
    try:
        yield (
            add_task(dap_servers, COUNT, min_batch_size=5, dp="none", helper_url=f"{proxy.url}/"),
            proxy,
        )
    finally:
        proxy.close()


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
