"""End to end with real processes: devices upload to a Leader, the driver aggregates with the
Helper, ``ldp-analyze collect`` decrypts and unshards."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
import requests

from client_sdk.dap.messages import AggregationJobInitReq, ReportError, UploadRequest
from client_sdk.dap.upload import prepare_report
from collector.dap.task import b64encode
from collector.process import entry_point
from tests.collector.dap.conftest import AGGREGATOR_TOKEN, TIME_PRECISION, DapPair

HISTOGRAM = ({"type": "histogram", "length": 4, "chunk_length": 2}, 10, "none")
COUNT = ({"type": "count"}, 10, "none")


@pytest.mark.parametrize("dap_pair", [HISTOGRAM], indirect=True)
def test_histogram_exact_sum_and_two_hot_rejected(dap_pair: DapPair) -> None:
    measurements = [i % 4 for i in range(30)] + [3] * 5
    dap_pair.upload_measurements(measurements)
    # A two-hot histogram crafted by hand: the device's encoding patched, the proof honest.
    vdaf = dap_pair.spec.build_vdaf()
    vdaf.flp.encode = lambda _m: [1, 1, 0, 0]  # type: ignore[method-assign,assignment]
    bad = prepare_report(dap_pair.device_task(vdaf), 0)
    assert dap_pair.upload([bad]).status == ()  # the Leader cannot tell before verifying
    totals = dap_pair.drive(process=True)  # the CLIs in their own processes here
    assert totals == {"aggregated": 35, "rejected": 1, "jobs": 1}
    done = dap_pair.collect(process=True)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["estimate"] == [8, 8, 7, 12]
    assert result["report_count"] == 35
    assert result["std_errors"] == [0.0] * 4 and result["epsilon"] is None
    for server in (dap_pair.leader, dap_pair.helper):  # rejected by both, counted by reason
        assert refused(server.url, dap_pair.spec.task_id_text) == {"vdaf_verify_error": 1}


@pytest.mark.parametrize("own_dap_pair", [COUNT], indirect=True)
def test_count_replay_counted_once(own_dap_pair: DapPair) -> None:
    dap_pair = own_dap_pair  # it kills a server: servers of its own
    task = dap_pair.device_task()
    reports = [prepare_report(task, i % 3 == 0) for i in range(12)]
    assert dap_pair.upload(reports).status == ()
    replayed = dap_pair.upload([reports[0], reports[3]])
    assert [(s.id, s.error) for s in replayed.status] == [
        (reports[0].report_metadata.report_id, ReportError.REPORT_REPLAYED),
        (reports[3].report_metadata.report_id, ReportError.REPORT_REPLAYED),
    ]
    assert dap_pair.drive()["aggregated"] == 12
    # After aggregation (and a restart of the Leader) the same ids are still refused.
    dap_pair.leader.restart()
    again = dap_pair.upload([reports[0]])
    assert [s.error for s in again.status] == [ReportError.REPORT_REPLAYED]
    assert dap_pair.drive()["aggregated"] == 0
    assert refused(dap_pair.leader.url, dap_pair.spec.task_id_text) == {"report_replayed": 3}
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["estimate"] == 4 and result["report_count"] == 12
    # The batch is never collected twice, nor an overlapping one.
    twice = dap_pair.collect()
    assert twice.returncode == 2 and "batchOverlap" in twice.stderr


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_below_min_batch_size_refused(dap_pair: DapPair) -> None:
    dap_pair.upload_measurements([True] * 9)
    dap_pair.drive()
    done = dap_pair.collect()
    assert done.returncode == 2
    assert "invalidBatchSize" in done.stderr and "9 reports" in done.stderr
    # Refused, not released: with one more report the same interval collects.
    dap_pair.upload_measurements([False])
    dap_pair.drive()
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["estimate"] == 9


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_job_resent_after_a_lost_answer_is_counted_once(dap_pair: DapPair) -> None:
    """The driver recorded a job and sent it, but its answer was lost (a crash, a timeout):
    the Helper answers the same request identically, and the next drive finishes it once."""
    from collector.dap import aggregator
    from collector.storage import Storage

    dap_pair.upload_measurements([True] * 7 + [False] * 5)
    with Storage(dap_pair.leader.db, create=False) as storage:
        conn = storage.db.conn
        task = aggregator.load_task(conn, dap_pair.spec.task_id_text, "leader")
        job = aggregator._new_job(conn, task, 1000, {"rejected": 0})
    assert job is not None
    job_id, request = job
    url = (
        f"{dap_pair.helper.url}/dap/tasks/{dap_pair.spec.task_id_text}/aggregation_jobs/"
        f"{b64encode(job_id)}"
    )
    headers = {
        "Authorization": f"Bearer {AGGREGATOR_TOKEN}",
        "Content-Type": AggregationJobInitReq.MEDIA_TYPE,
    }
    first = requests.put(url, data=request, headers=headers, timeout=30)
    second = requests.put(url, data=request, headers=headers, timeout=30)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content  # the stored answer, nothing aggregated again
    other = requests.put(url, data=request + b"\0", headers=headers, timeout=30)
    assert other.status_code == 409
    assert other.json()["type"] == "urn:ietf:params:ppm:dap:error:invalidMessage"
    unauthorized = requests.put(url, data=request, timeout=30)
    assert unauthorized.json()["type"] == "urn:ietf:params:ppm:dap:error:unauthorizedRequest"
    assert dap_pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}  # re-sent, finished
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["estimate"] == 7
    assert json.loads(done.stdout)["report_count"] == 12


def refused(url: str, task_id: str) -> dict[str, float]:
    """The ``ldp_dap_reports_refused_total`` counters of one task, by reason."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    found = {}
    for line in text.splitlines():
        if line.startswith("ldp_dap_reports_refused_total{") and f'task="{task_id}"' in line:
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            found[reason] = float(line.rsplit(" ", 1)[1])
    return found


SUM = ({"type": "sum", "max_measurement": 100}, 5, "none")
SUMVEC = ({"type": "sumvec", "length": 3, "max_measurement": 7, "chunk_length": 2}, 5, "none")


@pytest.mark.parametrize("dap_pair", [SUM], indirect=True)
def test_sum_and_malformed_upload(dap_pair: DapPair) -> None:
    dap_pair.upload_measurements([0, 1, 50, 99, 100, 37])
    answer = requests.post(
        f"{dap_pair.leader_dap}/tasks/{dap_pair.spec.task_id_text}/reports",
        data=b"\x00\x01",
        headers={"Content-Type": UploadRequest.MEDIA_TYPE},
        timeout=30,
    )
    assert answer.status_code == 400
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json()["type"] == "urn:ietf:params:ppm:dap:error:invalidMessage"
    unknown = requests.post(f"{dap_pair.leader_dap}/tasks/{'A' * 43}/reports", timeout=30)
    assert unknown.json()["type"] == "urn:ietf:params:ppm:dap:error:unrecognizedTask"
    assert dap_pair.drive()["aggregated"] == 6
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["estimate"] == 287


@pytest.mark.parametrize("dap_pair", [SUMVEC], indirect=True)
def test_sumvec(dap_pair: DapPair) -> None:
    dap_pair.upload_measurements([[1, 2, 3], [7, 0, 7], [0, 0, 0], [4, 4, 4], [7, 7, 7]])
    assert dap_pair.drive()["aggregated"] == 5
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["estimate"] == [19, 13, 21]


@pytest.mark.parametrize("own_dap_pair", [COUNT], indirect=True)
def test_helper_down_mid_job_then_back(own_dap_pair: DapPair) -> None:
    """The Helper is SIGKILLed: the driver fails naming it, the job stays recorded, and once
    the Helper is back the next drive re-sends it; every report is counted once."""
    dap_pair = own_dap_pair  # it kills a server: servers of its own
    dap_pair.upload_measurements([True] * 6 + [False] * 6)
    dap_pair.helper.kill()
    failed = subprocess.run(
        [
            *entry_point("ldp-collector", "collector.cli"),
            "dap",
            "drive",
            "--db",
            dap_pair.leader.db,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 2 and "error" in failed.stderr
    dap_pair.helper.start()
    assert dap_pair.drive() == {"aggregated": 12, "rejected": 0, "jobs": 1}
    assert dap_pair.drive() == {"aggregated": 0, "rejected": 0, "jobs": 0}
    done = dap_pair.collect()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["estimate"], result["report_count"]) == (6, 12)


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_reports_too_old_or_too_far_ahead_refused_and_counted(dap_pair: DapPair) -> None:
    """The real Leader's clock: a report older than the task's expiry (7 days by default) or
    starting beyond the tolerated skew (one time unit) is refused, counted by reason."""
    task = dap_pair.device_task()
    now = time.time()
    old = prepare_report(task, True, now=now - dap_pair.spec.report_expiry - 2 * TIME_PRECISION)
    early = prepare_report(task, True, now=now + 3 * TIME_PRECISION)
    fine = prepare_report(task, True, now=now)
    answer = dap_pair.upload([old, early, fine])
    assert [s.error for s in answer.status] == [
        ReportError.REPORT_DROPPED,
        ReportError.REPORT_TOO_EARLY,
    ]
    assert refused(dap_pair.leader.url, dap_pair.spec.task_id_text) == {
        "report_expired": 1,
        "report_too_early": 1,
    }
