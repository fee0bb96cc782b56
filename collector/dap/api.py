"""The DAP-18 HTTP API under ``/dap/`` (Leader and Helper, per task): binary DAP messages in,
binary out; errors are problem+json with DAP's types (``urn:ietf:params:ppm:dap:error:...``)."""

from __future__ import annotations

import hmac
from typing import Any

import requests
from flask import Blueprint, Response, current_app, request
from werkzeug.http import parse_options_header

from client_sdk.dap.messages import (
    AggregateShare,
    AggregateShareReq,
    AggregationJobContinueReq,
    AggregationJobInitReq,
    AggregationJobResp,
    CollectionJobReq,
    CollectionJobResp,
    HpkeConfigList,
    UploadErrors,
    UploadRequest,
)
from collector.cors import DeviceRoute
from collector.dap import aggregator
from collector.dap.aggregator import DapProblem
from collector.dap.task import AggregatorTask, b64decode
from collector.problems import PROBLEM_MEDIA_TYPE
from collector.web import _read_body, get_storage, write_turn

bp = Blueprint("dap", __name__, url_prefix="/dap")

DAP_ERROR = "urn:ietf:params:ppm:dap:error:"
HELPER_TIMEOUT = 30.0

DEVICE_ROUTES = {
    "dap.hpke_config": DeviceRoute("GET"),
    # DAP-18 uploads with POST (the route also takes PUT, for older clients; devices never do)
    "dap.upload": DeviceRoute("POST", ("Content-Type",)),
}
"""The Leader's routes a device calls (``client_sdk.dap``, the TypeScript client): what
``--cors-origin`` opens to web pages. Never the aggregation, collection or interop routes."""


@bp.errorhandler(DapProblem)
def _problem(error: DapProblem) -> Response:
    body = {
        "type": DAP_ERROR + error.name,
        "title": error.name,
        "status": error.status,
        "detail": error.detail,
    }
    response = Response(
        current_app.json.dumps(body), status=error.status, mimetype=PROBLEM_MEDIA_TYPE
    )
    if error.retry_after:
        response.headers["Retry-After"] = str(error.retry_after)
    return response


def _task(task_id: str, role: str, token: str | None) -> AggregatorTask:
    conn = get_storage().db.conn
    task = aggregator.load_task(conn, task_id, role)
    if token is not None:
        expected = getattr(task, token)
        header = request.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if task.auth_header == "dap-auth-token":  # a task added through the interop test API
            scheme, presented = "bearer", request.headers.get("DAP-Auth-Token", "")
        if (
            not expected
            or scheme.lower() != "bearer"
            or not hmac.compare_digest(presented.strip().encode(), expected.encode())
        ):
            raise DapProblem(401, "unauthorizedRequest", f"this route needs the task's {token}")
    return task


def _id(text: str, field: str) -> bytes:
    try:
        return b64decode(text, field, 16)
    except ValueError as error:
        raise DapProblem(400, "invalidMessage", str(error)) from None


def _message_body(media_type: str) -> bytes:
    """The request's body, a DAP message whose ``Content-Type`` must be ``media_type``
    (DAP-18's ``application/ppm-dap;message=NAME``; the type and parameter names are
    case-insensitive, other parameters such as ``version`` are allowed, RFC 9110 8.3.1).
    Otherwise 415 ``invalidMessage`` naming the header and the value received."""
    header = request.headers.get("Content-Type")
    expected_type, expected = parse_options_header(media_type)
    received_type, received = parse_options_header(header or "")
    if received_type.lower() != expected_type or received.get("message") != expected["message"]:
        got = "none" if header is None else repr(header[:100])
        raise DapProblem(415, "invalidMessage", f"Content-Type must be {media_type}; got {got}")
    return _read_body()


def _binary(body: bytes, media_type: str, status: int = 200) -> Response:
    return Response(body, status=status, mimetype=media_type)


def send(method: str, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """The Leader's HTTP client to the Helper."""
    response = requests.request(method, url, data=body, headers=headers, timeout=HELPER_TIMEOUT)
    return response.status_code, response.content


@bp.get("/hpke_config")
def hpke_config() -> Response:
    task_id = request.args.get("task_id")
    if not task_id:
        raise DapProblem(400, "invalidMessage", "hpke_config needs ?task_id= (per-task keys)")
    conn = get_storage().db.conn
    row = conn.execute("SELECT config FROM dap_tasks WHERE task_id = ?", [task_id]).fetchone()
    if row is None:
        raise DapProblem(404, "unrecognizedTask", f"no task {task_id[:60]!r} here")
    task = AggregatorTask.from_json(row[0])
    body = HpkeConfigList((task.hpke_config,)).encode()
    response = _binary(body, HpkeConfigList.MEDIA_TYPE)
    response.headers["Cache-Control"] = "max-age=86400"
    return response


@bp.route("/tasks/<task_id>/reports", methods=["PUT", "POST"])
def upload(task_id: str) -> Response:
    task = _task(task_id, "leader", None)
    body = _message_body(UploadRequest.MEDIA_TYPE)
    with write_turn():
        errors = aggregator.upload(get_storage().db.conn, task, body)
    return _binary(errors.encode(), UploadErrors.MEDIA_TYPE)


@bp.put("/tasks/<task_id>/aggregation_jobs/<job_id>")
def aggregation_job_init(task_id: str, job_id: str) -> Response:
    task = _task(task_id, "helper", "aggregator_token")
    job = _id(job_id, "aggregation job id")
    body = _message_body(AggregationJobInitReq.MEDIA_TYPE)
    with write_turn():
        answer = aggregator.helper_init(get_storage().db.conn, task, job, body)
    return _binary(answer, AggregationJobResp.MEDIA_TYPE)


@bp.route("/tasks/<task_id>/aggregation_jobs/<job_id>", methods=["POST", "DELETE"])
def aggregation_job_other(task_id: str, job_id: str) -> Response:
    task = _task(task_id, "helper", "aggregator_token")
    job = _id(job_id, "aggregation job id")
    conn = get_storage().db.conn
    exists = conn.execute(
        "SELECT 1 FROM dap_jobs WHERE task_id = ? AND job_id = ?", [task.spec.task_id_text, job]
    ).fetchone()
    if not exists:
        raise DapProblem(404, "unrecognizedAggregationJob", f"no aggregation job {job_id!r}")
    if request.method == "DELETE":
        return Response(status=204)  # Prio3 jobs finish in one step: nothing left to abandon
    _message_body(AggregationJobContinueReq.MEDIA_TYPE)
    raise DapProblem(400, "stepMismatch", "Prio3 jobs finish at initialization: no step 1")


@bp.post("/tasks/<task_id>/aggregate_shares")
def aggregate_shares(task_id: str) -> Response:
    task = _task(task_id, "helper", "aggregator_token")
    body = _message_body(AggregateShareReq.MEDIA_TYPE)
    with write_turn():
        answer = aggregator.aggregate_share(get_storage().db.conn, task, body)
    return _binary(answer, AggregateShare.MEDIA_TYPE)


@bp.put("/tasks/<task_id>/collection_jobs/<job_id>")
def collection_job_create(task_id: str, job_id: str) -> Response:
    task = _task(task_id, "leader", "collector_token")
    job = _id(job_id, "collection job id")
    body = _message_body(CollectionJobReq.MEDIA_TYPE)
    with write_turn():
        aggregator.create_collection(get_storage().db.conn, task, job, body)
    return Response(status=201)


@bp.route("/tasks/<task_id>/collection_jobs/<job_id>", methods=["GET", "POST"])
def collection_job_poll(task_id: str, job_id: str) -> Any:
    task = _task(task_id, "leader", "collector_token")
    job = _id(job_id, "collection job id")
    with write_turn():
        answer = aggregator.collection_result(get_storage().db.conn, task, job, send)
    if answer is None:
        response = Response(status=202)
        response.headers["Retry-After"] = "1"
        return response
    return _binary(answer, CollectionJobResp.MEDIA_TYPE)


@bp.delete("/tasks/<task_id>/collection_jobs/<job_id>")
def collection_job_delete(task_id: str, job_id: str) -> Response:
    task = _task(task_id, "leader", "collector_token")
    job = _id(job_id, "collection job id")
    with write_turn():
        conn = get_storage().db.conn
        # A job already answered stays: its batch was released and may not be collected again.
        conn.execute(
            "DELETE FROM dap_collections WHERE task_id = ? AND job_id = ? AND response IS NULL",
            [task.spec.task_id_text, job],
        )
        conn.commit()
    return Response(status=204)


@bp.get("/tasks/<task_id>/collections")
def collections(task_id: str) -> Response:
    """Not DAP: the Leader's answered collections of a task (interval, report count), so the
    Collector can state the cumulative guarantee (docs/math/dap-noise.md, "Composition")."""
    task = _task(task_id, "leader", "collector_token")
    found = aggregator.answered_collections(get_storage().db.conn, task)
    return Response(
        current_app.json.dumps({"task_id": task_id, "collections": found}),
        mimetype="application/json",
    )
