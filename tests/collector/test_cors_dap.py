"""``ldp-collector serve --cors-origin`` on a DAP Leader: a real Leader (gunicorn, real HTTP)
answers CORS for the two routes a device calls, the upload (``POST``, with the DAP media type's
``Content-Type``, which makes it a preflighted request) and ``GET hpke_config``; never for the
aggregation, collection or other routes, never for another origin, method or header."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from client_sdk.dap.messages import UploadErrors, UploadRequest
from client_sdk.dap.upload import prepare_report
from collector.cors import PREFLIGHT_MAX_AGE
from tests.collector.dap.conftest import (
    COLLECTOR_TOKEN,
    DapPair,
    DapServers,
    add_task,
    start_servers,
)

PAGE = "https://app.example"
STRANGER = "https://evil.example"
HISTOGRAM = {"type": "histogram", "length": 4, "chunk_length": 2}


def start_cors_servers(tmp: Path, origins: list[str]) -> DapServers:
    """``start_servers`` with the Leader serving ``--cors-origin`` for each of ``origins`` (it is
    restarted, on its port, with the flags)."""
    servers = start_servers(tmp)
    try:
        servers.leader.stop()
        for origin in origins:
            servers.leader.extra_args += ["--cors-origin", origin]
        servers.leader.start()
    except BaseException:
        servers.stop()
        raise
    return servers


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DapPair]:
    servers = start_cors_servers(tmp_path_factory.mktemp("cors-dap"), [PAGE])
    try:
        yield add_task(servers, HISTOGRAM, min_batch_size=10, dp="none")
    finally:
        servers.stop()


def _cors_headers(response: requests.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


def _preflight(url: str, origin: str, method: str, headers: str | None = None) -> requests.Response:
    asked = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers is not None:
        asked["Access-Control-Request-Headers"] = headers
    return requests.options(url, headers=asked, timeout=10)


def _upload_url(pair: DapPair) -> str:
    return f"{pair.leader_dap}/tasks/{pair.spec.task_id_text}/reports"


def test_a_listed_origin_gets_the_preflight_of_the_upload(pair: DapPair) -> None:
    answer = _preflight(_upload_url(pair), PAGE, "POST", "content-type")
    assert answer.status_code == 204
    assert _cors_headers(answer) == {
        "Access-Control-Allow-Origin": PAGE,
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "Content-Type",
        "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE),
    }
    assert answer.headers["Vary"] == "Origin"
    assert answer.content == b""


def test_a_cross_origin_upload_is_stored_and_its_answer_readable(pair: DapPair) -> None:
    report = prepare_report(pair.device_task(), 2)
    body = UploadRequest((report,)).encode()
    headers = {"Origin": PAGE, "Content-Type": UploadRequest.MEDIA_TYPE}
    for _ in range(2):  # the second time: report_replayed, in an answer the page can read too
        answer = requests.post(_upload_url(pair), data=body, headers=headers, timeout=10)
        assert answer.status_code == 200
        assert _cors_headers(answer) == {
            "Access-Control-Allow-Origin": PAGE,
            "Access-Control-Expose-Headers": "Retry-After",
        }
        assert answer.headers["Vary"] == "Origin"
    assert [s.error.name for s in UploadErrors.decode(answer.content).status] == ["REPORT_REPLAYED"]
    # DAP's problem documents too (a wrong media type; an unknown task)
    wrong = requests.post(
        _upload_url(pair), data=body, headers={**headers, "Content-Type": "text/plain"}, timeout=10
    )
    unknown = requests.post(
        f"{pair.leader_dap}/tasks/{'A' * 43}/reports", data=body, headers=headers, timeout=10
    )
    for problem, status in ((wrong, 415), (unknown, 404)):
        assert problem.status_code == status
        assert problem.headers["Content-Type"] == "application/problem+json"
        assert problem.headers["Access-Control-Allow-Origin"] == PAGE


def test_the_hpke_config_is_readable_cross_origin(pair: DapPair) -> None:
    url = f"{pair.leader_dap}/hpke_config"
    answer = requests.get(
        url, params={"task_id": pair.spec.task_id_text}, headers={"Origin": PAGE}, timeout=10
    )
    assert answer.status_code == 200 and answer.content
    assert answer.headers["Access-Control-Allow-Origin"] == PAGE
    preflight = _preflight(url, PAGE, "GET")
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Methods"] == "GET"
    assert "Access-Control-Allow-Headers" not in preflight.headers  # the GET needs none


def test_more_than_a_device_needs_gets_no_cors(pair: DapPair) -> None:
    upload = _upload_url(pair)
    for method, headers in [
        ("PUT", "content-type"),  # the route takes PUT from older clients; devices POST
        ("POST", "content-type, authorization"),
        ("POST", "content-type, dap-auth-token"),
        ("DELETE", None),
    ]:
        assert _cors_headers(_preflight(upload, PAGE, method, headers)) == {}, (method, headers)
    assert _cors_headers(_preflight(upload, STRANGER, "POST", "content-type")) == {}
    assert _cors_headers(_preflight(f"{pair.leader_dap}/hpke_config", STRANGER, "GET")) == {}


def test_aggregation_and_collection_routes_never_answer_cors(pair: DapPair) -> None:
    task = f"{pair.leader_dap}/tasks/{pair.spec.task_id_text}"
    job = "B" * 22
    for path, method in [
        (f"{task}/aggregation_jobs/{job}", "PUT"),
        (f"{task}/aggregation_jobs/{job}", "POST"),
        (f"{task}/aggregation_jobs/{job}", "DELETE"),
        (f"{task}/aggregate_shares", "POST"),
        (f"{task}/collection_jobs/{job}", "PUT"),
        (f"{task}/collection_jobs/{job}", "GET"),
        (f"{task}/collection_jobs/{job}", "POST"),
        (f"{task}/collection_jobs/{job}", "DELETE"),
        (f"{task}/collections", "GET"),
    ]:
        preflight = _preflight(path, PAGE, method, "content-type, authorization")
        assert _cors_headers(preflight) == {}, (path, method)
        assert _cors_headers(_preflight(path, PAGE, method)) == {}, (path, method)
    # the actual responses, with the Collector's token, carry none either
    auth = {"Origin": PAGE, "Authorization": f"Bearer {COLLECTOR_TOKEN}"}
    for path in (f"{task}/collection_jobs/{job}", f"{task}/collections"):
        answer = requests.get(path, headers=auth, timeout=10)
        assert answer.status_code < 500 and _cors_headers(answer) == {}, path
