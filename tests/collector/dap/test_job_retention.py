"""Retention of aggregation jobs, by ``forget_expired`` and ``ldp-collector dap gc``: the
Helper's stored answers (verifier messages) are deleted once no one can ask for them again
(every report of the job collected, or past ``report_expiry + clock_skew``), the Leader's
finished job rows at the next pass, its unfinished ones never; a replay of a deleted job is
refused report by report, counted nowhere. In-process aggregators with a clock the test
sets, then a real pair for the command and the metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.dap.messages import AggregationJobResp, Interval, ReportError, VerifyRespType
from collector.dap import aggregator
from collector.dap.api import send
from collector.storage import Storage
from tests.collector.dap.conftest import DapPair, _in_process
from tests.collector.dap.inprocess import TIME_PRECISION, InProcessPair

EXPIRY = 2 * 86400
COUNT = {"type": "count"}

Request = tuple[str, str, bytes, dict[str, str]]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[InProcessPair]:
    pair = InProcessPair(tmp_path, COUNT, report_expiry=EXPIRY)
    try:
        yield pair
    finally:
        pair.close()


def recording(pair: InProcessPair) -> list[Request]:
    """Record every request the Leader sends the Helper from now on."""
    sent: list[Request] = []
    forward = pair.send

    def send(method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        sent.append((method, url, body, headers))
        return forward(method, url, body, headers)

    pair.send = send  # type: ignore[method-assign]
    return sent


def jobs(pair: InProcessPair, role: str) -> list[str]:
    rows = pair.conn(role).execute(
        "SELECT state FROM dap_jobs WHERE task_id = ?", [pair.spec.task_id_text]
    )
    return [r[0] for r in rows]


def bucketed(conn: Any, task_id: str) -> int:
    """Reports in the aggregator's buckets for the task."""
    row = conn.execute(
        "SELECT sum(report_count) FROM dap_buckets WHERE task_id = ?", [task_id]
    ).fetchone()
    return int(row[0] or 0)


def gc(pair: InProcessPair, role: str) -> dict[str, int]:
    return aggregator.forget_expired(pair.conn(role), pair.tasks[role], now=pair.now)


def replay(pair: InProcessPair, request: Request) -> list[ReportError | None]:
    """Send an old aggregation job to the Helper again: each report's error (None: counted)."""
    status, body = pair.send(*request)
    assert status == 200, body
    return [
        None if r.verify_resp_type == VerifyRespType.CONTINUE else r.report_error
        for r in AggregationJobResp.decode(body).verify_resps
    ]


def test_a_job_goes_once_every_report_of_it_is_collected(pair: InProcessPair) -> None:
    sent = recording(pair)
    earlier, now = pair.unit() - 1, pair.unit()
    reports = pair.reports([True] * 3, at=pair.now - TIME_PRECISION) + pair.reports([True] * 2)
    assert pair.upload(reports).status == ()
    assert pair.drive() == {"aggregated": 5, "rejected": 0, "jobs": 1}
    assert jobs(pair, "leader") == jobs(pair, "helper") == ["done"]
    assert pair.collect(Interval(earlier, 1))["report_count"] == 3
    # Two reports of the job are still uncollected: the Leader might yet re-send it.
    assert gc(pair, "helper") == {"dropped": 0, "forgotten": 0, "jobs": 0}
    assert jobs(pair, "helper") == ["done"]
    assert gc(pair, "leader") == {"dropped": 0, "forgotten": 0, "jobs": 1}  # finished: no use
    assert pair.collect(Interval(now, 1))["report_count"] == 2
    assert gc(pair, "helper") == {"dropped": 0, "forgotten": 0, "jobs": 1}
    assert jobs(pair, "leader") == jobs(pair, "helper") == []
    (job,) = [r for r in sent if "/aggregation_jobs/" in r[1]]
    # The same job id and request again: a new job to the Helper now, and every report of it
    # a replay (the ids are held until they expire).
    assert replay(pair, job) == [ReportError.REPORT_REPLAYED] * 5
    assert bucketed(pair.conn("helper"), pair.spec.task_id_text) == 5


def test_a_job_goes_once_its_reports_are_past_expiry_and_skew(pair: InProcessPair) -> None:
    sent = recording(pair)
    unit = pair.unit()
    assert pair.upload(pair.reports([True] * 4)).status == ()
    assert pair.drive()["aggregated"] == 4  # never collected
    forgettable = (unit + 1) * TIME_PRECISION + EXPIRY + pair.spec.skew
    pair.now = forgettable - 1
    assert gc(pair, "helper") == {"dropped": 0, "forgotten": 0, "jobs": 0}
    assert jobs(pair, "helper") == ["done"]
    assert gc(pair, "leader") == {"dropped": 0, "forgotten": 0, "jobs": 1}
    pair.now = forgettable
    assert gc(pair, "helper") == {"dropped": 0, "forgotten": 4, "jobs": 1}
    assert gc(pair, "leader") == {"dropped": 0, "forgotten": 4, "jobs": 0}
    assert jobs(pair, "leader") == jobs(pair, "helper") == []
    (job,) = [r for r in sent if "/aggregation_jobs/" in r[1]]
    assert replay(pair, job) == [ReportError.REPORT_DROPPED] * 4  # refused as expired
    assert bucketed(pair.conn("helper"), pair.spec.task_id_text) == 4


def test_the_leaders_unfinished_job_stays(pair: InProcessPair) -> None:
    helper_up = pair.send
    pair.send = lambda *request: (503, b"down")  # type: ignore[method-assign]
    unit = pair.unit()
    assert pair.upload(pair.reports([True] * 2)).status == ()
    with pytest.raises(RuntimeError, match="503"):
        pair.drive()
    pair.now = (unit + 1) * TIME_PRECISION + EXPIRY + pair.spec.skew + TIME_PRECISION
    assert gc(pair, "leader") == {"dropped": 0, "forgotten": 0, "jobs": 0}
    assert jobs(pair, "leader") == ["sent"]  # pending work, re-sent by the next pass
    pair.send = helper_up  # type: ignore[method-assign]
    assert pair.drive() == {"aggregated": 0, "rejected": 2, "jobs": 1}  # expired at the Helper


@pytest.mark.parametrize("dap_pair", [(COUNT, 5, "none")], indirect=True)
def test_gc_deletes_collected_jobs_on_real_aggregators(dap_pair: DapPair) -> None:
    pair, tid = dap_pair, dap_pair.spec.task_id_text
    pair.upload_measurements([True] * 7 + [False] * 5)
    sent: list[Request] = []

    def recording_send(
        method: str, url: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        sent.append((method, url, body, headers))
        return send(method, url, body, headers)

    with Storage(pair.leader.db, create=False) as storage:  # the driver's code, recording
        conn = storage.db.conn
        task = aggregator.load_task(conn, tid, "leader")
        assert aggregator.drive(conn, task, recording_send)["aggregated"] == 12
    done = pair.collect()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["report_count"] == 12
    assert held_jobs(pair.helper.url, tid) == {"done": 1.0}
    for server in (pair.helper, pair.leader):
        assert dap_gc(server.db, tid) == {"dropped": 0, "forgotten": 0, "jobs": 1}
        assert held_jobs(server.url, tid) == {}
    (method, url, body, headers) = sent[0]
    answer = requests.request(method, url, data=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    errors = {r.report_error for r in AggregationJobResp.decode(answer.content).verify_resps}
    assert errors == {ReportError.REPORT_REPLAYED}
    with Storage(pair.helper.db, create=False) as storage:
        assert bucketed(storage.db.conn, tid) == 12  # nothing counted twice
    # The replay's own answer (every report refused) is kept until the next pass.
    assert dap_gc(pair.helper.db, tid) == {"dropped": 0, "forgotten": 0, "jobs": 1}


def dap_gc(db: str | Path, task_id: str) -> dict[str, int]:
    """``ldp-collector dap gc`` for one task: its counts."""
    done = _in_process("collector.cli", ["dap", "gc", "--db", str(db), f"--task-id={task_id}"])
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.split(": ", 1)[1]))


def held_jobs(url: str, task_id: str) -> dict[str, float]:
    """The ``ldp_dap_jobs`` gauge of one task, by state."""
    found = {}
    for line in requests.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("ldp_dap_jobs{") and f'task="{task_id}"' in line:
            state = line.split('state="', 1)[1].split('"', 1)[0]
            found[state] = float(line.rsplit(" ", 1)[1])
    return found
