"""The aggregators check the ``Content-Type`` of every DAP request with a body (DAP-18's
``application/ppm-dap;message=NAME``): a wrong or missing one is refused 415, as problem+json
of DAP's type ``invalidMessage`` naming the header and the value received; the right one is
accepted whatever its case and extra parameters (real processes)."""

from __future__ import annotations

import os
from typing import Any

import pytest
import requests

from client_sdk.dap.messages import (
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobInitReq,
    CollectionJobReq,
    UploadRequest,
)
from client_sdk.dap.upload import prepare_report
from collector.dap.task import b64encode
from collector.storage import Storage
from tests.collector.dap.conftest import AGGREGATOR_TOKEN, COLLECTOR_TOKEN, DapPair

COUNT = ({"type": "count"}, 1, "none")


def _routes(pair: DapPair) -> list[tuple[str, str, str, dict[str, str], str]]:
    """(method, url, name, token headers, the message's media type) of each route taking a
    DAP message."""
    tid = pair.spec.task_id_text
    leader, helper = f"{pair.leader.url}/dap/tasks/{tid}", f"{pair.helper.url}/dap/tasks/{tid}"
    job = b64encode(os.urandom(16))
    to_helper = {"Authorization": f"Bearer {AGGREGATOR_TOKEN}"}
    to_leader = {"Authorization": f"Bearer {COLLECTOR_TOKEN}"}
    return [
        ("POST", f"{leader}/reports", "upload", {}, UploadRequest.MEDIA_TYPE),
        ("PUT", f"{leader}/reports", "upload (PUT)", {}, UploadRequest.MEDIA_TYPE),
        (
            "PUT",
            f"{helper}/aggregation_jobs/{job}",
            "aggregation job init",
            to_helper,
            AggregationJobInitReq.MEDIA_TYPE,
        ),
        (
            "PUT",
            f"{leader}/collection_jobs/{job}",
            "collection job",
            to_leader,
            CollectionJobReq.MEDIA_TYPE,
        ),
        (
            "POST",
            f"{helper}/aggregate_shares",
            "aggregate share",
            to_helper,
            AggregateShareReq.MEDIA_TYPE,
        ),
    ]


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_every_route_with_a_body_refuses_a_wrong_or_missing_content_type(
    dap_pair: DapPair,
) -> None:
    for method, url, name, auth, expected in _routes(dap_pair):
        other = CollectionJobReq if expected == UploadRequest.MEDIA_TYPE else UploadRequest
        earlier = expected.replace("ppm-dap;message=", "dap-")  # an earlier draft's family
        for sent in ("application/octet-stream", None, earlier, other.MEDIA_TYPE):
            headers = dict(auth) if sent is None else {**auth, "Content-Type": sent}
            answer = requests.request(method, url, data=b"\x00\x01", headers=headers, timeout=30)
            assert answer.status_code == 415, (name, sent, answer.text)
            assert answer.headers["Content-Type"] == "application/problem+json"
            problem: dict[str, Any] = answer.json()
            assert problem["type"] == "urn:ietf:params:ppm:dap:error:invalidMessage"
            assert problem["status"] == 415
            got = "none" if sent is None else repr(sent)
            assert problem["detail"] == f"Content-Type must be {expected}; got {got}", name


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_the_continue_route_checks_its_type_too(dap_pair: DapPair) -> None:
    # An existing job: the Helper answers a continuation of it (Prio3 has no step 1) only
    # once its type is right.
    dap_pair.upload_measurements([True])
    dap_pair.drive()
    conn_url = f"{dap_pair.helper.url}/dap/tasks/{dap_pair.spec.task_id_text}/aggregation_jobs"
    with Storage(dap_pair.helper.db, create=False) as storage:
        (job,) = storage.db.conn.execute(
            "SELECT job_id FROM dap_jobs WHERE task_id = ?", [dap_pair.spec.task_id_text]
        ).fetchone()
    url = f"{conn_url}/{b64encode(bytes(job))}"
    auth = {"Authorization": f"Bearer {AGGREGATOR_TOKEN}"}
    wrong = requests.post(url, data=b"\x00", headers=auth, timeout=30)
    assert wrong.status_code == 415
    assert wrong.json()["detail"] == (
        f"Content-Type must be {AggregationJobContinueReq.MEDIA_TYPE}; got none"
    )
    right = {**auth, "Content-Type": AggregationJobContinueReq.MEDIA_TYPE}
    answer = requests.post(url, data=b"\x00", headers=right, timeout=30)
    assert answer.json()["type"] == "urn:ietf:params:ppm:dap:error:stepMismatch"


@pytest.mark.parametrize("dap_pair", [COUNT], indirect=True)
def test_the_right_type_is_accepted_in_any_case_and_with_parameters(dap_pair: DapPair) -> None:
    task = dap_pair.device_task()
    url = f"{dap_pair.leader_dap}/tasks/{dap_pair.spec.task_id_text}/reports"
    for media in (
        UploadRequest.MEDIA_TYPE,
        "Application/PPM-DAP; Message=upload-req; version=18",
        'application/ppm-dap;message="upload-req"',
    ):
        body = UploadRequest((prepare_report(task, True),)).encode()
        answer = requests.post(url, data=body, headers={"Content-Type": media}, timeout=30)
        assert answer.status_code == 200, (media, answer.text)
    # The message name is compared exactly: another message's type is refused.
    body = UploadRequest((prepare_report(task, True),)).encode()
    other = {"Content-Type": CollectionJobReq.MEDIA_TYPE}
    assert requests.post(url, data=body, headers=other, timeout=30).status_code == 415
    assert dap_pair.drive()["aggregated"] == 3
