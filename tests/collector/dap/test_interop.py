"""The DAP interop test API (draft-dcook-ppm-dap-interop-test-design) driven as the design's test
runner drives it, against real processes: a Leader and a Helper (``ldp-collector serve
--dap-interop``), a Client and a Collector (``python -m analysis.dap_interop``).

The runner below follows the design's "Test Runner Operation": ready on every party, a random
task id, tokens and verify key, endpoint_for_task on both aggregators (relative URLs made
absolute with the host and port the runner knows), add_task on the Collector then the Leader
then the Helper, uploads through the Client, collection_start and collection_poll on the
Collector until complete. The Leader aggregates on its own (its driver thread).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask

from client_sdk.dap.messages import HpkeConfigList
from collector import create_app
from collector.process import CollectorProcess, ServerProcess
from tests.collector.dap.test_e2e import refused

TIME_PRECISION = 3600
VERIFY_KEY_SIZE = 32  # Prio3 with XofTurboShake128
POLL_TIMEOUT = 120.0


class InteropApp(ServerProcess):
    """``python -m analysis.dap_interop --role ROLE`` as a real process."""

    def __init__(self, role: str, *, log_dir: Path) -> None:
        super().__init__(log_dir=log_dir)
        self.role = role
        self.name = f"interop-{role}"
        self.ready_prefix = f"ldp-dap-interop {role}: serving"

    def arguments(self) -> list[str]:
        return [sys.executable, "-m", "analysis.dap_interop", "--role", self.role, "--port", "0"]


@dataclass
class Parties:
    leader: CollectorProcess
    helper: CollectorProcess
    client: InteropApp
    collector: InteropApp


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def call(server: ServerProcess, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a command; the design answers 200 whenever the command was understood."""
    answer = requests.post(f"{server.url}/internal/test/{endpoint}", json=body, timeout=120)
    assert answer.status_code == 200, (endpoint, answer.status_code, answer.text)
    assert answer.headers["Content-Type"].startswith("application/json")
    document: dict[str, Any] = answer.json()
    return document


@pytest.fixture(scope="module")
def parties(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Parties]:
    tmp = tmp_path_factory.mktemp("interop")
    started: list[ServerProcess] = []
    try:
        for name in ("leader", "helper"):
            started.append(
                CollectorProcess(
                    tmp / f"{name}.db",
                    workers=1,
                    log_dir=tmp,
                    # The Leader's driver inside serve, at the old interop thread's pace.
                    extra_args=["--dap-interop", "--dap-drive-interval", "0.5"],
                ).start()
            )
        for role in ("client", "collector"):
            started.append(InteropApp(role, log_dir=tmp).start())
        leader, helper, client, collector = started
        assert isinstance(leader, CollectorProcess) and isinstance(helper, CollectorProcess)
        assert isinstance(client, InteropApp) and isinstance(collector, InteropApp)
        # The runner waits until every party answers ready.
        for server in started:
            assert call(server, "ready", {}) is not None
        yield Parties(leader, helper, client, collector)
    finally:
        for server in reversed(started):
            server.stop()


def provision(
    parties: Parties,
    vdaf: dict[str, str],
    *,
    min_batch_size: int,
    collector_token: str = "",
    window: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The runner's task set-up; the common fields of the task (the upload's too). ``window``:
    ``task_start`` / ``task_end`` given to the aggregators' ``add_task``."""
    task_id = b64(os.urandom(32))
    aggregator_token, token = b64(os.urandom(16)), b64(os.urandom(16))
    endpoints = {}
    for role, server in (("leader", parties.leader), ("helper", parties.helper)):
        answer = call(
            server, "endpoint_for_task", {"task_id": task_id, "role": role, "hostname": "127.0.0.1"}
        )
        assert answer["status"] == "success", answer
        endpoint = answer["endpoint"]
        endpoints[role] = endpoint if "://" in endpoint else f"{server.url}{endpoint}"
    common = {
        "task_id": task_id,
        "leader": endpoints["leader"],
        "helper": endpoints["helper"],
        "vdaf": vdaf,
        "batch_mode": 1,
        "min_batch_size": min_batch_size,
        "time_precision": TIME_PRECISION,
    }
    added = call(
        parties.collector,
        "add_task",
        {**common, "collector_authentication_token": collector_token or token},
    )
    assert added["status"] == "success", added
    verify_key = b64(os.urandom(VERIFY_KEY_SIZE))
    for role, server in (("leader", parties.leader), ("helper", parties.helper)):
        body = {
            **common,
            "role": role,
            "leader_authentication_token": aggregator_token,
            "vdaf_verify_key": verify_key,
            "collector_hpke_config": added["collector_hpke_config"],
            "max_batch_query_count": 1,
            **(window or {}),
        }
        if role == "leader":
            body["collector_authentication_token"] = token
        answer = call(server, "add_task", body)
        assert answer["status"] == "success", answer
    return common


def current_batch() -> dict[str, int]:
    unit = int(time.time()) // TIME_PRECISION
    return {
        "type": 1,
        "batch_interval_start": (unit - 1) * TIME_PRECISION,
        "batch_interval_duration": 3 * TIME_PRECISION,
    }


def collect(parties: Parties, task_id: str) -> dict[str, Any]:
    start = call(
        parties.collector,
        "collection_start",
        {"task_id": task_id, "agg_param": "", "query": current_batch()},
    )
    assert start["status"] == "success", start
    deadline = time.monotonic() + POLL_TIMEOUT
    while True:
        poll = call(parties.collector, "collection_poll", {"handle": start["handle"]})
        if poll["status"] != "in progress" or time.monotonic() > deadline:
            return poll
        time.sleep(0.5)


CASES = [
    ({"type": "Prio3Count"}, ["1", "0", "1", "1", "0"], "3"),
    ({"type": "Prio3Sum", "max_measurement": "255"}, ["7", "255", "0", "100"], "362"),
    (
        {"type": "Prio3Histogram", "length": "4", "chunk_length": "2"},
        ["0", "3", "3", "1", "3"],
        ["1", "1", "0", "3"],
    ),
    (
        {"type": "Prio3SumVec", "length": "3", "max_measurement": "7", "chunk_length": "2"},
        [["1", "0", "7"], ["2", "5", "7"], ["0", "0", "1"]],
        ["3", "5", "15"],
    ),
    (
        {"type": "Prio3MultihotCountVec", "length": "3", "max_weight": "2", "chunk_length": "2"},
        [["1", "0", "1"], ["0", "0", "1"], ["1", "1", "0"]],
        ["2", "1", "2"],
    ),
]


@pytest.mark.parametrize(
    ("vdaf", "measurements", "expected"), CASES, ids=[c[0]["type"] for c in CASES]
)
def test_runner_aggregates_and_collects_the_sum(
    parties: Parties, vdaf: dict[str, str], measurements: list[Any], expected: Any
) -> None:
    common = provision(parties, vdaf, min_batch_size=len(measurements))
    for measurement in measurements:
        answer = call(parties.client, "upload", {**common, "measurement": measurement})
        assert answer["status"] == "success", answer
    result = collect(parties, common["task_id"])
    assert result["status"] == "complete", result
    assert result["result"] == expected
    assert result["report_count"] == len(measurements)
    assert result["interval_start"] == current_batch()["batch_interval_start"]
    assert result["interval_duration"] == 3 * TIME_PRECISION


def test_upload_with_a_given_time_lands_in_that_batch(parties: Parties) -> None:
    common = provision(parties, {"type": "Prio3Count"}, min_batch_size=2)
    past = (int(time.time()) // TIME_PRECISION - 10) * TIME_PRECISION
    for _ in range(2):
        answer = call(parties.client, "upload", {**common, "measurement": "1", "time": past + 5})
        assert answer["status"] == "success", answer
    query = {"type": 1, "batch_interval_start": past, "batch_interval_duration": TIME_PRECISION}
    start = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": query},
    )
    assert start["status"] == "success", start
    deadline = time.monotonic() + POLL_TIMEOUT
    poll = {"status": "in progress"}
    while poll["status"] == "in progress" and time.monotonic() < deadline:
        time.sleep(0.5)
        poll = call(parties.collector, "collection_poll", {"handle": start["handle"]})
    assert poll["status"] == "complete", poll
    assert (poll["result"], poll["report_count"], poll["interval_start"]) == ("2", 2, past)


def test_hpke_config_without_task_id_is_the_interop_tasks_key(parties: Parties) -> None:
    """DAP-18's clients ask ``{aggregator}/hpke_config`` with no task id (the Client above
    does); every interop task of an aggregator has that one key."""
    tasks = [provision(parties, {"type": "Prio3Count"}, min_batch_size=1) for _ in range(2)]
    for server in (parties.leader, parties.helper):
        bare = requests.get(f"{server.url}/dap/hpke_config", timeout=30)
        assert bare.status_code == 200, bare.text
        assert bare.headers["Content-Type"] == "application/ppm-dap;message=hpke-config-list"
        for task in tasks:
            per_task = requests.get(
                f"{server.url}/dap/hpke_config", params={"task_id": task["task_id"]}, timeout=30
            )
            assert per_task.content == bare.content
        assert len(HpkeConfigList.decode(bare.content).configs) == 1


def test_design_cases_future_report_and_late_report(parties: Parties) -> None:
    """Three of the design's test cases: a report far in the future is refused; after a
    collection a late report for the same batch is refused and the result stays the same;
    max_batch_query_count (1) is enforced: an overlapping collection is refused."""
    common = provision(parties, {"type": "Prio3Count"}, min_batch_size=2)
    future = int(time.time()) + 10 * TIME_PRECISION
    early = call(parties.client, "upload", {**common, "measurement": "1", "time": future})
    assert early["status"] == "error" and "report_too_early" in early["error"], early
    for measurement in ("1", "1"):
        assert call(parties.client, "upload", {**common, "measurement": measurement})["status"] == (
            "success"
        )
    start = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": current_batch()},
    )
    assert start["status"] == "success", start
    deadline = time.monotonic() + POLL_TIMEOUT
    first = {"status": "in progress"}
    while first["status"] == "in progress" and time.monotonic() < deadline:
        time.sleep(0.5)
        first = call(parties.collector, "collection_poll", {"handle": start["handle"]})
    assert first["status"] == "complete" and first["result"] == "2", first
    late = call(parties.client, "upload", {**common, "measurement": "1"})
    assert late["status"] == "error" and "batch_collected" in late["error"], late
    again = call(parties.collector, "collection_poll", {"handle": start["handle"]})
    assert again == first
    overlap = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": current_batch()},
    )
    assert overlap["status"] == "error" and "batchOverlap" in overlap["error"], overlap


def test_the_task_window_of_add_task_is_enforced(parties: Parties) -> None:
    """``task_start`` / ``task_end`` of ``add_task`` reach the aggregators: reports outside
    are refused (``report_dropped`` at upload, DAP-18) and counted by cause; those inside are
    collected."""
    unit = int(time.time()) // TIME_PRECISION
    start, end = (unit - 6) * TIME_PRECISION, (unit - 4) * TIME_PRECISION
    common = provision(
        parties,
        {"type": "Prio3Count"},
        min_batch_size=2,
        window={"task_start": start, "task_end": end},
    )
    for when, status in ((start - 1, "error"), (start + 5, "success"), (end - 5, "success")):
        answer = call(parties.client, "upload", {**common, "measurement": "1", "time": when})
        assert answer["status"] == status, (when, answer)
    now = call(parties.client, "upload", {**common, "measurement": "1"})  # after task_end
    assert now["status"] == "error" and "report_dropped" in now["error"], now
    assert refused(parties.leader.url, common["task_id"]) == {
        "task_not_started": 1,
        "task_expired": 1,
    }
    query = {"type": 1, "batch_interval_start": start, "batch_interval_duration": end - start}
    begun = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": query},
    )
    assert begun["status"] == "success", begun
    deadline = time.monotonic() + POLL_TIMEOUT
    poll = {"status": "in progress"}
    while poll["status"] == "in progress" and time.monotonic() < deadline:
        time.sleep(0.5)
        poll = call(parties.collector, "collection_poll", {"handle": begun["handle"]})
    assert (poll["status"], poll["result"], poll["report_count"]) == ("complete", "2", 2), poll


def test_wrong_collector_token_is_refused_by_the_leader(parties: Parties) -> None:
    common = provision(
        parties, {"type": "Prio3Count"}, min_batch_size=1, collector_token="not-the-leaders-token"
    )
    start = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": current_batch()},
    )
    assert start["status"] == "error"
    assert "401" in start["error"] and "unauthorizedRequest" in start["error"]


def test_helper_refuses_the_bearer_header_on_an_interop_task(parties: Parties) -> None:
    """Tokens of interop tasks travel in DAP-Auth-Token (the design); the Leader sends them so
    (the sums above), and the Helper takes no other header for them."""
    common = provision(parties, {"type": "Prio3Count"}, min_batch_size=1)
    url = f"{common['helper']}tasks/{common['task_id']}/aggregation_jobs/{b64(bytes(16))}"
    answer = requests.put(url, data=b"", headers={"Authorization": "Bearer x" * 3}, timeout=30)
    assert answer.status_code == 401
    assert answer.json()["type"] == "urn:ietf:params:ppm:dap:error:unauthorizedRequest"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vdaf": {"type": "Poplar1", "bits": "8"}}, "vdaf.type must be Prio3Count"),
        ({"vdaf": {"type": "Prio3Sum"}}, "vdaf.max_measurement must be a non-negative integer"),
        ({"batch_mode": 2}, "batch_mode 2 is not supported"),
        ({"vdaf_verify_key": b64(bytes(16))}, "vdaf_verify_key must be 32 bytes; got 16"),
        ({"role": "collector"}, 'role must be "leader" or "helper"'),
        ({"time_precision": "an hour"}, "time_precision must be a non-negative integer"),
        ({"task_id": b64(b"short")}, "task_id must be 32 bytes; got 5"),
        ({"leader_authentication_token": "two words"}, "leader_authentication_token must be"),
        ({"max_batch_query_count": 2}, "max_batch_query_count must be 1"),
    ],
)
def test_add_task_errors_name_the_field(
    parties: Parties, change: dict[str, Any], message: str
) -> None:
    body = {
        "task_id": b64(os.urandom(32)),
        "leader": f"{parties.leader.url}/dap/",
        "helper": f"{parties.helper.url}/dap/",
        "vdaf": {"type": "Prio3Count"},
        "leader_authentication_token": "aggregator-token",
        "role": "helper",
        "vdaf_verify_key": b64(bytes(32)),
        "batch_mode": 1,
        "min_batch_size": 1,
        "time_precision": TIME_PRECISION,
        "collector_hpke_config": b64(bytes.fromhex("01002000010001") + b"\x00\x20" + bytes(32)),
        **change,
    }
    answer = call(parties.helper, "add_task", body)
    assert answer["status"] == "error" and message in answer["error"], answer


def test_client_and_collector_errors_name_the_field(parties: Parties) -> None:
    common = provision(parties, {"type": "Prio3Count"}, min_batch_size=1)
    upload = call(parties.client, "upload", {**common, "measurement": "2"})
    assert upload["status"] == "error" and 'must be "0" or "1"' in upload["error"]
    bare = {k: v for k, v in common.items() if k != "min_batch_size"}
    upload = call(parties.client, "upload", {**bare, "measurement": "1"})
    assert upload["status"] == "error"
    assert "min_batch_size must be a non-negative integer; got None" in upload["error"]
    start = call(
        parties.collector,
        "collection_start",
        {"task_id": common["task_id"], "agg_param": "", "query": {**current_batch(), "type": 2}},
    )
    assert start["status"] == "error" and "query.type 2 is not supported" in start["error"]
    poll = call(parties.collector, "collection_poll", {"handle": "unknown"})
    assert poll["status"] == "error" and "no collection job" in poll["error"]


def test_unknown_internal_test_endpoint_is_404(parties: Parties) -> None:
    for server in (parties.leader, parties.client, parties.collector):
        answer = requests.post(f"{server.url}/internal/test/no_such_command", json={}, timeout=30)
        assert answer.status_code == 404


def _app(tmp_path: Path, interop: bool) -> Flask:
    return create_app(
        {
            "DB": str(tmp_path / "collector.db"),
            "ADMIN_TOKEN": "admin-token-" + "x" * 20,
            "TESTING": True,
            "DAP_INTEROP": interop,
        }
    )


def test_interop_api_is_off_unless_asked(tmp_path: Path) -> None:
    """add_task provisions without any credential: it exists only with --dap-interop."""
    off = _app(tmp_path, interop=False).test_client()
    for endpoint in ("ready", "endpoint_for_task", "add_task"):
        assert off.post(f"/internal/test/{endpoint}", json={}).status_code == 404
    # Not called here: a request would start the Leader's driver thread in this process.
    rules = {rule.rule for rule in _app(tmp_path, interop=True).url_map.iter_rules()}
    assert {f"/internal/test/{e}" for e in ("ready", "endpoint_for_task", "add_task")} <= rules
