"""The DAP interop test API of an Aggregator (draft-dcook-ppm-dap-interop-test-design, as Janus
serves it for DAP-18): ``POST /internal/test/ready``, ``/internal/test/endpoint_for_task`` and
``/internal/test/add_task``, so an external test runner can provision tasks in this service.

Registered only by ``ldp-collector serve --dap-interop`` (``create_app({"DAP_INTEROP": True})``):
``add_task`` provisions a task with no credential at all, so it is never on in production
(docs/dap.md, "Interop"). An interop Leader must aggregate on its own: ``serve``'s driver
(``collector.dap.driver``) does, for these tasks as for every Leader task, so ``serve`` refuses
``--dap-interop`` with the driver off.

The JSON formats (numbers of VDAF parameters and measurements as base-10 strings, binary values
as unpadded base64url, times in seconds) are translated here, Flask-free, for the Collector's and
the Client's interop apps too (``analysis.dap_interop``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from flask import Blueprint, Flask, Response, jsonify, request

from client_sdk.dap.hpke import generate_key_pair
from client_sdk.dap.messages import HpkeConfig, HpkeConfigList, Interval
from client_sdk.sqlite import immediate
from collector.dap import aggregator
from collector.dap.task import AggregatorTask, TaskSpec, b64decode
from collector.web import get_storage, write_turn

__all__ = [
    "INTEROP_TASK_INFO",
    "InteropError",
    "bp",
    "init_app",
    "interval_from_query",
    "number",
    "spec_from_interop",
    "vdaf_from_interop",
]

bp = Blueprint("dap_interop", __name__, url_prefix="/internal/test")

# The interop API has no task_info; Janus's interop binaries all use this one, and the task
# configuration bound into every HPKE AAD must be byte-identical on every party.
INTEROP_TASK_INFO = "task-info"
TIME_INTERVAL, LEADER_SELECTED = 1, 2
DAP_ENDPOINT = "/dap/"


class InteropError(ValueError):
    """A request the interop API cannot serve: answered ``{"status": "error", "error": ...}``."""


def number(document: dict[str, Any], name: str, where: str = "") -> int:
    """A non-negative integer given as a base-10 string (the design's rule for VDAF numbers) or
    as a JSON number (its rule for times and sizes)."""
    value = document.get(name)
    text = value if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return _non_negative(value, where + name)
    if text is not None and text.strip().isdigit():
        return int(text.strip())
    raise InteropError(f"{where}{name} must be a non-negative integer; got {value!r}")


def _non_negative(value: int, name: str) -> int:
    if value < 0:
        raise InteropError(f"{name} must be a non-negative integer; got {value!r}")
    return value


def _text(document: dict[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str) or not value:
        raise InteropError(f"{name} must be a non-empty string; got {value!r}")
    return value


def _token(document: dict[str, Any], name: str) -> str:
    """A token that must travel in an HTTP header: visible ASCII only."""
    value = _text(document, name)
    if not all(33 <= ord(c) <= 126 for c in value):
        raise InteropError(f"{name} must be visible ASCII (an HTTP header value)")
    return value


def vdaf_from_interop(vdaf: Any) -> dict[str, Any]:
    """The task file's ``vdaf`` object of an interop VDAF object (``{"type": "Prio3Sum",
    "max_measurement": "255"}`` and so on; ``bits`` of the draft's older text is read as
    ``max_measurement = 2^bits - 1``)."""
    if not isinstance(vdaf, dict):
        raise InteropError(f"vdaf must be an object; got {vdaf!r}")
    kind = vdaf.get("type")

    def maximum() -> int:
        if "max_measurement" in vdaf or "bits" not in vdaf:
            return number(vdaf, "max_measurement", "vdaf.")
        return (1 << number(vdaf, "bits", "vdaf.")) - 1

    if kind == "Prio3Count":
        return {"type": "count"}
    if kind == "Prio3Sum":
        return {"type": "sum", "max_measurement": maximum()}
    if kind == "Prio3Histogram":
        return {
            "type": "histogram",
            "length": number(vdaf, "length", "vdaf."),
            "chunk_length": number(vdaf, "chunk_length", "vdaf."),
        }
    if kind == "Prio3SumVec":
        return {
            "type": "sumvec",
            "length": number(vdaf, "length", "vdaf."),
            "max_measurement": maximum(),
            "chunk_length": number(vdaf, "chunk_length", "vdaf."),
        }
    if kind == "Prio3MultihotCountVec":
        return {
            "type": "multihotcountvec",
            "length": number(vdaf, "length", "vdaf."),
            "max_weight": number(vdaf, "max_weight", "vdaf."),
            "chunk_length": number(vdaf, "chunk_length", "vdaf."),
        }
    raise InteropError(
        "vdaf.type must be Prio3Count, Prio3Sum, Prio3Histogram, Prio3SumVec or "
        "Prio3MultihotCountVec; "
        f"got {str(kind)[:60]!r}"
    )


def _batch_mode(document: dict[str, Any]) -> None:
    # "batch_mode" in Janus's DAP-18 interop binaries, "query_type" in the design's text.
    name = "batch_mode" if "batch_mode" in document else "query_type"
    mode = number(document, name)
    if mode != TIME_INTERVAL:
        raise InteropError(
            f"{name} {mode} is not supported: only time-interval batches ({TIME_INTERVAL})"
        )


def spec_from_interop(document: Any) -> TaskSpec:
    """The public part of a task from an interop ``add_task`` (or ``upload``) request.
    ``InteropError`` naming the field; ``ValueError`` from ``TaskSpec`` likewise."""
    if not isinstance(document, dict):
        raise InteropError("the request body must be a JSON object")
    _batch_mode(document)
    time_precision = number(document, "time_precision")
    # Required even of the Client (the design's older text has none): DAP-18 binds it into
    # every AAD, so a guess would only make the aggregators' decryption fail later.
    min_batch_size = number(document, "min_batch_size")
    # The task's validity window (seconds), enforced by the aggregators (TaskSpec.window_error).
    window = {
        name: number(document, name)
        for name in ("task_start", "task_end")
        if document.get(name) is not None
    }
    return TaskSpec.from_json(
        {
            "task_id": _text(document, "task_id"),
            "task_info": INTEROP_TASK_INFO,
            "leader": _text(document, "leader"),
            "helper": _text(document, "helper"),
            "vdaf": vdaf_from_interop(document.get("vdaf")),
            "min_batch_size": min_batch_size,
            "time_precision": time_precision,
            **window,
        }
    )


def interval_from_query(query: Any, time_precision: int) -> Interval:
    """A collection's ``Interval`` (in time units) from the design's ``query`` object (seconds).
    The start and the duration must be multiples of the task's ``time_precision``."""
    if not isinstance(query, dict):
        raise InteropError(f"query must be an object; got {query!r}")
    mode = number(query, "type", "query.")
    if mode != TIME_INTERVAL:
        raise InteropError(f"query.type {mode} is not supported: only time-interval queries (1)")
    start = number(query, "batch_interval_start", "query.")
    duration = number(query, "batch_interval_duration", "query.")
    for name, value in (("batch_interval_start", start), ("batch_interval_duration", duration)):
        if value % time_precision:
            raise InteropError(
                f"query.{name} {value} is not a multiple of time_precision {time_precision}"
            )
    if duration == 0:
        raise InteropError("query.batch_interval_duration must be positive; got 0")
    return Interval(start // time_precision, duration // time_precision)


def _interop_tasks(conn: sqlite3.Connection) -> list[AggregatorTask]:
    rows = conn.execute("SELECT config FROM dap_tasks ORDER BY rowid").fetchall()
    tasks = [AggregatorTask.from_json(row[0]) for row in rows]
    return [task for task in tasks if task.auth_header == "dap-auth-token"]


def _interop_key(conn: sqlite3.Connection) -> tuple[HpkeConfig, bytes]:
    """One HPKE key for every interop task of this aggregator: DAP-18's clients (Janus's among
    them) fetch ``{aggregator}/hpke_config`` with no task id, so the key cannot be per task."""
    for task in _interop_tasks(conn):
        return task.hpke_config, task.hpke_private_key
    pair = generate_key_pair()
    return HpkeConfig(1, 0x0020, 0x0001, 0x0001, pair.public_key), pair.private_key


def _aggregator_task(document: Any, conn: sqlite3.Connection) -> AggregatorTask:
    spec = spec_from_interop(document)
    role = document.get("role")
    if role not in ("leader", "helper"):
        raise InteropError(f'role must be "leader" or "helper"; got {role!r}')
    if "max_batch_query_count" in document and number(document, "max_batch_query_count") != 1:
        raise InteropError(
            f"max_batch_query_count must be 1 (a batch is collected once); "
            f"got {document['max_batch_query_count']!r}"
        )
    verify_key = b64decode(_text(document, "vdaf_verify_key"), "vdaf_verify_key")
    size = spec.build_vdaf().VERIFY_KEY_SIZE
    if len(verify_key) != size:
        raise InteropError(f"vdaf_verify_key must be {size} bytes; got {len(verify_key)}")
    collector_config = HpkeConfig.decode(
        b64decode(_text(document, "collector_hpke_config"), "collector_hpke_config")
    )
    hpke_config, private_key = _interop_key(conn)
    return AggregatorTask(
        spec=spec,
        role=role,
        verify_key=verify_key,
        hpke_config=hpke_config,
        hpke_private_key=private_key,
        collector_hpke_config=collector_config,
        aggregator_token=_token(document, "leader_authentication_token"),
        collector_token=(
            _token(document, "collector_authentication_token") if role == "leader" else ""
        ),
        auth_header="dap-auth-token",
    )


def _answer(**fields: Any) -> Response:
    """The design: 200 whenever the command was understood; success or error in the body."""
    return jsonify(fields)


@bp.post("/ready")
def ready() -> Response:
    return _answer()


@bp.post("/endpoint_for_task")
def endpoint_for_task() -> Response:
    # One DAP API for every task; the runner makes it absolute with the host and port it knows.
    return _answer(status="success", endpoint=DAP_ENDPOINT)


@bp.post("/add_task")
def add_task() -> Response:
    try:
        conn = get_storage().db.conn
        # One transaction: the first interop task makes the key every later one reads.
        with write_turn(), immediate(conn):
            body = request.get_json(force=True, silent=True)
            aggregator.insert_task(conn, _aggregator_task(body, conn))
    except ValueError as error:  # InteropError, TaskSpec's, base64 and HpkeConfig decoding
        return _answer(status="error", error=str(error))
    return _answer(status="success")


def _hpke_config_without_task_id() -> Response | None:
    """``GET /dap/hpke_config`` with no ``task_id``: the interop tasks' key (DAP-18's request;
    the service's own route wants a task id, its keys being per task)."""
    if request.method != "GET" or request.path != f"{DAP_ENDPOINT}hpke_config":
        return None
    if request.args.get("task_id"):
        return None
    tasks = _interop_tasks(get_storage().db.conn)
    if not tasks:
        return None  # the route's own answer: it needs a task id
    body = HpkeConfigList((tasks[0].hpke_config,)).encode()
    return Response(body, mimetype=HpkeConfigList.MEDIA_TYPE)


def init_app(app: Flask) -> None:
    """Serve the interop test API on ``app`` (its Leader tasks are driven by ``serve``'s
    driver, ``collector.dap.driver``, as every Leader task is)."""
    app.register_blueprint(bp)
    app.before_request(_hpke_config_without_task_id)
