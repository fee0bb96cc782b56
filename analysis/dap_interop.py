"""The DAP interop test API of the Collector and of the Client
(draft-dcook-ppm-dap-interop-test-design, as Janus serves it for DAP-18), each a small app an
external test runner drives:

    python -m analysis.dap_interop --role collector --host 0.0.0.0 --port 8080
    python -m analysis.dap_interop --role client --port 8080

Collector: ``POST /internal/test/ready``, ``add_task`` (makes this task's HPKE key pair and
answers its config), ``collection_start`` (puts a collection job on the Leader; the handle is
the job id), ``collection_poll`` (one poll of the Leader; when done, opens and unshards both
aggregate shares with :func:`analysis.dap_collect.decode_result`). Client: ``ready`` and
``upload`` (fetches both aggregators' HPKE configs and uploads one report made by the device's
own :func:`client_sdk.dap.upload.prepare_report`). The Client's app lives here, not in
``client_sdk``, because it needs an HTTP server the device SDK must not depend on.

Tasks and collection jobs are kept in memory: a test container lives for one test. Tokens travel
in ``DAP-Auth-Token``, as the design says. Like the Aggregator's (``collector.dap.interop``),
these apps are for tests only: docs/dap.md, "Interop".
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import requests
from flask import Blueprint, Flask, Response, jsonify, request

from analysis.dap_collect import decode_result
from client_sdk.dap.hpke import generate_key_pair
from client_sdk.dap.messages import (
    CollectionJobReq,
    CollectionJobResp,
    HpkeConfig,
    HpkeConfigList,
    Interval,
    Query,
    UploadErrors,
    UploadRequest,
)
from client_sdk.dap.upload import DapTask, prepare_report, select_hpke_config
from collector.dap.interop import (
    InteropError,
    interval_from_query,
    number,
    spec_from_interop,
)
from collector.dap.task import TaskSpec, b64decode, b64encode

__all__ = ["client_app", "collector_app", "main", "measurement_from_interop"]

TIMEOUT = 30.0


@dataclass
class _CollectorTask:
    spec: TaskSpec
    private_key: bytes
    token: str


@dataclass
class _Job:
    task: _CollectorTask
    url: str
    req: CollectionJobReq
    result: dict[str, Any] | None = None


def _ok(**fields: Any) -> Response:
    return jsonify({"status": "success", **fields})


def _error(error: Exception) -> Response:
    # The design: 200 whenever the command was understood; the failure is in the body.
    return jsonify({"status": "error", "error": str(error)})


def _body() -> dict[str, Any]:
    document = request.get_json(force=True, silent=True)
    if not isinstance(document, dict):
        raise InteropError("the request body must be a JSON object")
    return document


def _common(name: str) -> Blueprint:
    bp = Blueprint(name, __name__, url_prefix="/internal/test")
    bp.add_url_rule("/ready", "ready", lambda: jsonify({}), methods=["POST"])
    return bp


def _healthz(app: Flask) -> None:
    # What collector.process.ServerProcess waits for before a test drives the app.
    app.add_url_rule("/healthz", "healthz", lambda: "ok")


def _put_collection_job(task: _CollectorTask, interval: Interval) -> tuple[str, _Job]:
    """Put a collection job for ``interval`` on the Leader; its handle (the job id)."""
    req = CollectionJobReq(Query.time_interval(interval))
    handle = b64encode(os.urandom(16))
    url = f"{task.spec.leader}tasks/{task.spec.task_id_text}/collection_jobs/{handle}"
    answer = requests.put(
        url,
        data=req.encode(),
        headers={
            "DAP-Auth-Token": task.token,
            "Content-Type": CollectionJobReq.MEDIA_TYPE,
        },
        timeout=TIMEOUT,
    )
    if answer.status_code not in (200, 201):
        raise InteropError(
            f"the Leader refused the collection job: {answer.status_code} {answer.text[:500]}"
        )
    return handle, _Job(task, url, req)


def _complete(spec: TaskSpec, result: dict[str, Any]) -> Response:
    """The design's answer for a finished collection: times in seconds, numbers as strings."""
    estimate = result["estimate"]
    return jsonify(
        {
            "status": "complete",
            "report_count": result["report_count"],
            "interval_start": result["interval"]["start"] * spec.time_precision,
            "interval_duration": result["interval"]["duration"] * spec.time_precision,
            "result": [str(x) for x in estimate] if isinstance(estimate, list) else str(estimate),
        }
    )


def collector_app() -> Flask:
    """The Collector's interop app."""
    bp = _common("dap_interop_collector")
    tasks: dict[bytes, _CollectorTask] = {}
    jobs: dict[str, _Job] = {}
    lock = threading.Lock()

    @bp.post("/add_task")
    def add_task() -> Response:
        try:
            document = _body()
            spec = spec_from_interop(document)
            token = document.get("collector_authentication_token")
            if not isinstance(token, str) or not token:
                raise InteropError(
                    f"collector_authentication_token must be a string; got {token!r}"
                )
            with lock:
                if spec.task_id in tasks:
                    raise InteropError(f"task {spec.task_id_text} was added already")
                pair = generate_key_pair()
                tasks[spec.task_id] = _CollectorTask(spec, pair.private_key, token)
            config = HpkeConfig(1, 0x0020, 0x0001, 0x0001, pair.public_key)
        except ValueError as error:
            return _error(error)
        return _ok(collector_hpke_config=b64encode(config.encode()))

    @bp.post("/collection_start")
    def collection_start() -> Response:
        try:
            document = _body()
            task_id = b64decode(str(document.get("task_id")), "task_id", 32)
            task = tasks.get(task_id)
            if task is None:
                raise InteropError(f"task_id {document.get('task_id')!r} was not added")
            if b64decode(str(document.get("agg_param", "")), "agg_param"):
                raise InteropError("agg_param must be empty: Prio3 has no aggregation parameter")
            interval = interval_from_query(document.get("query"), task.spec.time_precision)
            handle, job = _put_collection_job(task, interval)
            with lock:
                jobs[handle] = job
        except (ValueError, requests.RequestException) as error:
            return _error(error)
        return _ok(handle=handle)

    @bp.post("/collection_poll")
    def collection_poll() -> Response:
        try:
            handle = _body().get("handle")
            job = jobs.get(handle) if isinstance(handle, str) else None
            if job is None:
                raise InteropError(f"no collection job with handle {str(handle)[:60]!r}")
            if job.result is None:
                answer = requests.get(
                    job.url, headers={"DAP-Auth-Token": job.task.token}, timeout=TIMEOUT
                )
                if answer.status_code == 202:
                    return jsonify({"status": "in progress"})
                if answer.status_code != 200:
                    raise InteropError(
                        f"the collection job failed: {answer.status_code} {answer.text[:500]}"
                    )
                resp = CollectionJobResp.decode(answer.content)
                job.result = decode_result(job.task.spec, resp, job.req, job.task.private_key)
        except (ValueError, requests.RequestException) as error:
            return _error(error)
        return _complete(job.task.spec, job.result)

    app = Flask(__name__)
    app.register_blueprint(bp)
    _healthz(app)
    return app


def measurement_from_interop(spec: TaskSpec, value: Any) -> Any:
    """A measurement of the design's JSON (base-10 strings) for ``spec``'s VDAF."""
    kind = spec.vdaf["type"]
    if kind == "sumvec":
        if not isinstance(value, list):
            raise InteropError(
                f"measurement must be a list for Prio3SumVec; got {type(value).__name__}"
            )
        return [number({"measurement": v}, "measurement") for v in value]
    if kind == "multihotcountvec":
        if not isinstance(value, list):
            raise InteropError(
                f"measurement must be a list for Prio3MultihotCountVec; got {type(value).__name__}"
            )
        bits = [number({"measurement": v}, "measurement") for v in value]
        if any(bit not in (0, 1) for bit in bits):
            raise InteropError('measurement must list "0" or "1" for Prio3MultihotCountVec')
        return [bool(bit) for bit in bits]
    if isinstance(value, list):
        raise InteropError(f"measurement must be one number for {kind}; got a list")
    measurement = number({"measurement": value}, "measurement")
    if kind == "count" and measurement not in (0, 1):
        raise InteropError(f'measurement must be "0" or "1" for Prio3Count; got {value!r}')
    return bool(measurement) if kind == "count" else measurement


def _hpke_config(endpoint: str, role: str) -> HpkeConfig:
    # DAP-18's request: no task id (collector.dap.interop answers it for interop tasks).
    answer = requests.get(f"{endpoint}hpke_config", timeout=TIMEOUT)
    if answer.status_code != 200:
        raise InteropError(f"the {role}'s hpke_config: {answer.status_code} {answer.text[:300]}")
    return select_hpke_config(HpkeConfigList.decode(answer.content), role)


def client_app() -> Flask:
    """The Client's interop app: the device's ``prepare_report`` behind the design's API."""
    bp = _common("dap_interop_client")

    @bp.post("/upload")
    def upload() -> Response:
        try:
            document = _body()
            spec = spec_from_interop(document)
            measurement = measurement_from_interop(spec, document.get("measurement"))
            now = number(document, "time") if document.get("time") is not None else None
            task = DapTask(
                spec.task_id,
                spec.configuration(),
                spec.build_vdaf(),
                _hpke_config(spec.leader, "leader"),
                _hpke_config(spec.helper, "helper"),
            )
            report = prepare_report(task, measurement, now=now)
            answer = requests.post(
                f"{spec.leader}tasks/{spec.task_id_text}/reports",
                data=UploadRequest((report,)).encode(),
                headers={"Content-Type": UploadRequest.MEDIA_TYPE},
                timeout=TIMEOUT,
            )
            if answer.status_code != 200:
                raise InteropError(
                    f"the Leader refused the upload: {answer.status_code} {answer.text[:500]}"
                )
            refused = UploadErrors.decode(answer.content).status
            if refused:
                raise InteropError(
                    f"the Leader refused the report: {refused[0].error.name.lower()}"
                )
        except (ValueError, requests.RequestException) as error:
            return _error(error)
        return _ok()

    app = Flask(__name__)
    app.register_blueprint(bp)
    _healthz(app)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.dap_interop",
        description="TESTS ONLY: the DAP interop test API of a Collector or a Client",
    )
    parser.add_argument("--role", required=True, choices=("collector", "client"))
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (0: a free one; default 8080)")
    args = parser.parse_args(argv)
    from werkzeug.serving import make_server

    app = collector_app() if args.role == "collector" else client_app()
    server = make_server(args.host, args.port, app, threaded=True)
    print(
        f"ldp-dap-interop {args.role}: serving http://{args.host}:{server.server_port}", flush=True
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
