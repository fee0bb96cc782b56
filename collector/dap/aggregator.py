"""The DAP-18 aggregators' protocol logic over the collector's SQLite database (Flask-free).

Leader: :func:`upload` stores reports (anti-replay by ``PRIMARY KEY (task_id, report_id)``);
:func:`drive` groups them into aggregation jobs, verifies its shares (batched Prio3), sends the
``AggregationJobInitReq`` to the Helper and accumulates the output shares into one bucket per
time unit; :func:`collection_result` answers a collection job once the Helper's aggregate share
is in. Helper: :func:`helper_init` (idempotent per job: the same request gets the stored answer)
and :func:`aggregate_share`. Both add their noise once per batch and store the sealed answer, so
a retried collection never draws fresh noise (which would average it away).

Prio3 has one verification round; the ping-pong messages are VDAF's (draft-irtf-cfrg-vdaf,
"Ping-pong topology"): ``initialize(verifier_share)`` from the Leader, ``finish(verifier_message)``
from the Helper.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import math
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from client_sdk.dap.codec import DapDecodeError
from client_sdk.dap.hpke import HpkeError, seal_base
from client_sdk.dap.messages import (
    AggregateShare,
    AggregateShareAad,
    AggregateShareReq,
    AggregationJobInitReq,
    AggregationJobResp,
    BatchMode,
    BatchSelector,
    CollectionJobReq,
    CollectionJobResp,
    HpkeCiphertext,
    Interval,
    PingPongMessage,
    PingPongType,
    Report,
    ReportError,
    ReportShare,
    ReportUploadStatus,
    Role,
    UploadErrors,
    UploadRequest,
    VerifyInit,
    VerifyResp,
    VerifyRespType,
    aggregate_share_info,
    vdaf_context,
)
from client_sdk.dap.upload import DapTask, open_input_share
from client_sdk.randomness import RandomSource
from client_sdk.sqlite import immediate
from client_sdk.vdaf import Prio3, VdafError
from client_sdk.vdaf.batch import verify_init_batch
from collector.dap.task import AggregatorTask, b64encode

__all__ = [
    "DapProblem",
    "aggregate_share",
    "answered_collections",
    "collection_result",
    "count_refused",
    "create_collection",
    "drive",
    "forget_expired",
    "helper_init",
    "load_task",
    "provision",
    "upload",
]

logger = logging.getLogger(__name__)

PING_INITIALIZE, PING_FINISH = 0, 2
EXPIRED = "report_expired"  # the metrics' reason for a too-old report (DAP's report_dropped)


class DapProblem(Exception):
    """A DAP error: answered as problem+json with type ``urn:ietf:params:ppm:dap:error:NAME``."""

    def __init__(self, status: int, name: str, detail: str, *, retry_after: int = 0) -> None:
        super().__init__(detail)
        self.status, self.name, self.detail, self.retry_after = status, name, detail, retry_after


def load_task(conn: sqlite3.Connection, task_id: str, role: str) -> AggregatorTask:
    """The task ``task_id`` (base64url) held in ``role``; 404 ``unrecognizedTask`` otherwise."""
    row = conn.execute("SELECT config FROM dap_tasks WHERE task_id = ?", [task_id]).fetchone()
    task = AggregatorTask.from_json(row[0]) if row else None
    if task is None or task.role != role:
        raise DapProblem(404, "unrecognizedTask", f"no {role} task {task_id[:60]!r} here")
    return task


def provision(conn: sqlite3.Connection, task: AggregatorTask) -> None:
    """Store ``task`` in this aggregator; ``ValueError`` if its id is held with another
    configuration (the same one again is a no-op)."""
    with immediate(conn):
        insert_task(conn, task)


def insert_task(conn: sqlite3.Connection, task: AggregatorTask) -> None:
    """:func:`provision` inside the caller's transaction."""
    tid = task.spec.task_id_text
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    row = conn.execute("SELECT config FROM dap_tasks WHERE task_id = ?", [tid]).fetchone()
    if row is not None and row[0] != task.to_json():
        raise ValueError(f"task {tid} exists with another configuration")
    conn.execute(
        "INSERT OR IGNORE INTO dap_tasks (task_id, role, config, created) VALUES (?, ?, ?, ?)",
        [tid, task.role, task.to_json(), now],
    )


def _decode(cls: Any, body: bytes) -> Any:
    try:
        return cls.decode(body)
    except DapDecodeError as error:
        raise DapProblem(400, "invalidMessage", str(error)) from None


def _device_task(task: AggregatorTask) -> DapTask:
    # open_input_share reads only this role's HPKE config; the peer's is not known here.
    return DapTask(
        task.spec.task_id,
        task.spec.configuration(),
        task.spec.build_vdaf(),
        task.hpke_config,
        task.hpke_config,
    )


def count_refused(
    conn: sqlite3.Connection, tid: str, reason: ReportError | str, n: int = 1
) -> None:
    """Count ``n`` reports refused for ``reason`` (a ``ReportError`` or a metrics label such
    as :data:`EXPIRED`; in the caller's transaction)."""
    if n:
        conn.execute(
            "INSERT INTO dap_counters (task_id, reason, value) VALUES (?, ?, ?) "
            "ON CONFLICT (task_id, reason) DO UPDATE SET value = value + excluded.value",
            [tid, reason if isinstance(reason, str) else reason.name.lower(), n],
        )


def _time_error(task: AggregatorTask, unit: int, now: float) -> ReportError | None:
    """``report_too_early`` beyond the tolerated skew, ``report_dropped`` once expired."""
    if task.spec.too_early(unit, now):
        return ReportError.REPORT_TOO_EARLY
    if task.spec.expired(unit, now):
        return ReportError.REPORT_DROPPED
    return None


def _count_error(conn: sqlite3.Connection, tid: str, error: ReportError) -> None:
    count_refused(conn, tid, EXPIRED if error == ReportError.REPORT_DROPPED else error)


def forget_expired(
    conn: sqlite3.Connection, task: AggregatorTask, *, now: float | None = None
) -> dict[str, int]:
    """Retention: drop the reports still waiting past their expiry (their shares with them,
    counted :data:`EXPIRED`), forget the anti-replay ids that
    :meth:`~collector.dap.task.TaskSpec.forgettable` allows (a replay of one is refused as
    expired) and the finished aggregation jobs no one can ask for again
    (:func:`_forget_jobs`). Counts ``dropped``, ``forgotten`` and ``jobs``."""
    spec, tid = task.spec, task.spec.task_id_text
    now = time.time() if now is None else now
    # (time + 1) * precision + expiry <= now, solved for time: the newest unit that qualifies.
    dropped_below = (math.floor(now) - spec.report_expiry) // spec.time_precision
    forgotten_below = (math.floor(now) - spec.skew - spec.report_expiry) // spec.time_precision
    with immediate(conn):
        dropped = conn.execute(
            "DELETE FROM dap_reports WHERE task_id = ? AND state = 'start' AND job_id IS NULL "
            "AND time < ?",
            [tid, dropped_below],
        ).rowcount
        count_refused(conn, tid, EXPIRED, dropped)
        forgotten = conn.execute(
            "DELETE FROM dap_reports WHERE task_id = ? AND state != 'start' AND time < ?",
            [tid, forgotten_below],
        ).rowcount
        jobs = _forget_jobs(conn, task, forgotten_below)
    return {"dropped": dropped, "forgotten": forgotten, "jobs": jobs}


def _forget_jobs(conn: sqlite3.Connection, task: AggregatorTask, forgotten_below: int) -> int:
    """Delete the finished aggregation jobs no one can ask for again (in the caller's
    transaction; the number deleted).

    The Leader's ``done`` rows serve nothing (no one asks the Leader about a job; its ``sent``
    jobs are pending work and stay). The Helper keeps a job's answer (verifier messages) for a
    re-sent request, until each report id the job recorded is forgotten (its time unit below
    ``forgotten_below``) or lies in a collected interval: the Leader re-sends a job until it
    has stored the answer, and asks for an interval's share only once no report of it waits
    for a job, so a collected report proves its job finished at the Leader. A job whose
    reports are all past ``report_expiry + clock_skew`` could still be re-sent by a Leader cut
    off from the Helper that long after it answered: each report is then refused as expired,
    though the Helper counted it, and collecting its interval is refused ``batchMismatch``
    (docs/dap.md, "Report times and retention"). A job id seen again after this is a new job:
    its reports are refused as replayed or expired, never counted twice."""
    tid = task.spec.task_id_text
    if task.role == "leader":
        return conn.execute(
            "DELETE FROM dap_jobs WHERE task_id = ? AND state = 'done'", [tid]
        ).rowcount
    # One pass over the ids (no index by job): their distinct (job, time unit) pairs.
    return conn.execute(
        "DELETE FROM dap_jobs WHERE task_id = ? AND job_id NOT IN ("
        " SELECT r.job_id FROM (SELECT DISTINCT job_id, time FROM dap_reports"
        "  WHERE task_id = ? AND job_id IS NOT NULL AND time >= ?) r"
        " WHERE NOT EXISTS (SELECT 1 FROM dap_collections c WHERE c.task_id = ?"
        "  AND c.start <= r.time AND r.time < c.start + c.duration))",
        [tid, tid, forgotten_below, tid],
    ).rowcount


def _collected(conn: sqlite3.Connection, task_id: str, unit: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM dap_collections WHERE task_id = ? AND start <= ? AND ? < start + duration",
        [task_id, unit, unit],
    ).fetchone()
    return row is not None


# -- Leader: uploads


def upload(
    conn: sqlite3.Connection, task: AggregatorTask, body: bytes, *, now: float | None = None
) -> UploadErrors:
    """Store the reports of an ``UploadRequest``; the refused ones, with their reason."""
    request: UploadRequest = _decode(UploadRequest, body)
    tid = task.spec.task_id_text
    now = time.time() if now is None else now
    refused: list[ReportUploadStatus] = []
    with immediate(conn):
        for report in request.reports:
            meta = report.report_metadata
            error: ReportError | None = None
            cause: ReportError | None = None  # what the metrics count, when not the error
            if report.leader_encrypted_input_share.config_id != task.hpke_config.id:
                error = ReportError.HPKE_UNKNOWN_CONFIG_ID
            elif (error := _time_error(task, meta.time, now)) is not None:
                pass
            elif (cause := task.spec.window_error(meta.time)) is not None:
                error = ReportError.REPORT_DROPPED  # DAP-18's answer at upload, outside the window
            elif _collected(conn, tid, meta.time):
                error = ReportError.BATCH_COLLECTED
            else:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO dap_reports (task_id, report_id, time, report, state) "
                    "VALUES (?, ?, ?, ?, 'start')",
                    [tid, meta.report_id, meta.time, report.encode()],
                )
                if cursor.rowcount == 0:
                    error = ReportError.REPORT_REPLAYED
            if error is not None:
                refused.append(ReportUploadStatus(meta.report_id, error))
                _count_error(conn, tid, cause or error)
    return UploadErrors(tuple(refused))


# -- both: buckets


def _add_to_buckets(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    vdaf: Prio3[Any, Any],
    accepted: Sequence[tuple[bytes, int, list[int]]],
) -> None:
    """Add ``(report_id, time, out_share)`` to the bucket of each report's time unit, with its
    count and checksum (XOR of SHA-256 of the report ids, DAP-18 "Batch Validation")."""
    tid = task.spec.task_id_text
    for report_id, unit, out_share in accepted:
        row = conn.execute(
            "SELECT agg_share, report_count, checksum FROM dap_buckets "
            "WHERE task_id = ? AND start = ?",
            [tid, unit],
        ).fetchone()
        share, count, checksum = (
            (vdaf.decode_agg_share(None, row[0]), row[1], row[2])
            if row
            else (vdaf.agg_init(None), 0, bytes(32))
        )
        share = vdaf.agg_update(None, share, out_share)
        digest = hashlib.sha256(report_id).digest()
        checksum = bytes(a ^ b for a, b in zip(checksum, digest, strict=True))
        conn.execute(
            "INSERT OR REPLACE INTO dap_buckets (task_id, start, agg_share, report_count, "
            "checksum) VALUES (?, ?, ?, ?, ?)",
            [tid, unit, vdaf.encode_agg_share(share), count + 1, checksum],
        )


def _batch(
    conn: sqlite3.Connection, task: AggregatorTask, vdaf: Prio3[Any, Any], interval: Interval
) -> tuple[list[int], int, bytes]:
    """The aggregate share, report count and checksum of the buckets in ``interval``."""
    share, count, checksum = vdaf.agg_init(None), 0, bytes(32)
    for blob, n, digest in conn.execute(
        "SELECT agg_share, report_count, checksum FROM dap_buckets "
        "WHERE task_id = ? AND start >= ? AND start < ?",
        [task.spec.task_id_text, interval.start, interval.start + interval.duration],
    ):
        share = vdaf.agg_update(None, share, vdaf.decode_agg_share(None, blob))
        count += n
        checksum = bytes(a ^ b for a, b in zip(checksum, digest, strict=True))
    return share, count, checksum


# -- Helper: aggregation jobs


def _ping(kind: int, payload: bytes) -> bytes:
    """Prio3's one-round ping-pong: ``initialize(verifier_share)``, ``finish(verifier_message)``."""
    if kind == PING_INITIALIZE:
        return PingPongMessage.initialize(payload).encode()
    return PingPongMessage.finish(payload).encode()


def _unping(data: bytes, kind: int) -> bytes:
    message = PingPongMessage.decode(data).expect(PingPongType(kind))
    return message.verifier_share if kind == PING_INITIALIZE else message.verifier_message


def helper_init(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    job_id: bytes,
    body: bytes,
    *,
    now: float | None = None,
) -> bytes:
    """Run an ``AggregationJobInitReq`` to its end; the encoded ``AggregationJobResp``.

    A repeated request for the same job gets the stored answer (nothing is aggregated twice);
    another request under the same job id is refused. A report id seen in an earlier job is
    rejected ``report_replayed``.
    """
    spec, tid = task.spec, task.spec.task_id_text
    request_hash = hashlib.sha256(body).digest()
    with immediate(conn):
        row = conn.execute(
            "SELECT request_hash, response FROM dap_jobs WHERE task_id = ? AND job_id = ?",
            [tid, job_id],
        ).fetchone()
        if row is not None:
            if row[0] != request_hash:
                raise DapProblem(
                    409,
                    "invalidMessage",
                    f"aggregation job {b64encode(job_id)} exists with another request",
                )
            return bytes(row[1])
        request: AggregationJobInitReq = _decode(AggregationJobInitReq, body)
        vdaf = spec.build_vdaf()
        ctx = vdaf_context(spec.task_id)
        device = _device_task(task)
        now = time.time() if now is None else now
        errors: dict[bytes, ReportError] = {}
        opened: list[tuple[VerifyInit, bytes]] = []
        seen: set[bytes] = set()
        for init in request.verify_inits:
            share = init.report_share
            meta = share.report_metadata
            rid = meta.report_id
            if rid in seen:
                raise DapProblem(400, "invalidMessage", f"report {rid.hex()} twice in the job")
            seen.add(rid)
            if conn.execute(
                "SELECT 1 FROM dap_reports WHERE task_id = ? AND report_id = ?", [tid, rid]
            ).fetchone():
                errors[rid] = ReportError.REPORT_REPLAYED
            elif (time_error := _time_error(task, meta.time, now)) is not None:
                errors[rid] = time_error
            elif (window_error := spec.window_error(meta.time)) is not None:
                errors[rid] = window_error
            elif _collected(conn, tid, meta.time):
                errors[rid] = ReportError.BATCH_COLLECTED
            elif share.encrypted_input_share.config_id != task.hpke_config.id:
                errors[rid] = ReportError.HPKE_UNKNOWN_CONFIG_ID
            else:
                try:
                    plain = open_input_share(
                        device,
                        Role.HELPER,
                        task.hpke_private_key,
                        meta,
                        share.public_share,
                        share.encrypted_input_share,
                    )
                    opened.append((init, plain.payload))
                except (HpkeError, DapDecodeError):
                    errors[rid] = ReportError.HPKE_DECRYPT_ERROR
        messages: dict[bytes, bytes] = {}
        accepted: list[tuple[bytes, int, list[int]]] = []
        if opened:
            batch = _verify_batch(
                vdaf,
                task.verify_key,
                ctx,
                1,
                [
                    (i.report_share.report_metadata.report_id, i.report_share.public_share, s)
                    for i, s in opened
                ],
            )
            for (init, _), state, helper_share in zip(
                opened, batch.states(), batch.verifier_shares, strict=True
            ):
                meta = init.report_share.report_metadata
                try:
                    leader_share = vdaf.decode_verifier_share(
                        None, _unping(init.payload, PING_INITIALIZE)
                    )
                    message = vdaf.verifier_shares_to_message(
                        ctx, None, [leader_share, helper_share]
                    )
                    out_share = vdaf.verify_next(ctx, state, message)
                except (VdafError, ValueError):
                    errors[meta.report_id] = ReportError.VDAF_VERIFY_ERROR
                    continue
                messages[meta.report_id] = vdaf.encode_verifier_message(message)
                accepted.append((meta.report_id, meta.time, out_share))
        _add_to_buckets(conn, task, vdaf, accepted)
        for reason in errors.values():
            _count_error(conn, tid, reason)
        resps = []
        for init in request.verify_inits:
            meta = init.report_share.report_metadata
            rid = meta.report_id
            if rid in errors:
                resps.append(VerifyResp(rid, VerifyRespType.REJECT, report_error=errors[rid]))
            else:
                resps.append(
                    VerifyResp(rid, VerifyRespType.CONTINUE, _ping(PING_FINISH, messages[rid]))
                )
            if errors.get(rid) != ReportError.REPORT_REPLAYED:
                conn.execute(
                    "INSERT INTO dap_reports (task_id, report_id, time, job_id, state) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [tid, rid, meta.time, job_id, "rejected" if rid in errors else "aggregated"],
                )
        response = AggregationJobResp(tuple(resps)).encode()
        conn.execute(
            "INSERT INTO dap_jobs (task_id, job_id, request_hash, response, state) "
            "VALUES (?, ?, ?, ?, 'done')",
            [tid, job_id, request_hash, response],
        )
    return response


def _verify_batch(
    vdaf: Prio3[Any, Any],
    verify_key: bytes,
    ctx: bytes,
    agg_id: int,
    reports: Sequence[tuple[bytes, bytes, bytes]],
) -> Any:
    """Batched ``verify_init`` of ``(report_id, public_share, input_share)``."""
    return verify_init_batch(
        vdaf,
        verify_key,
        ctx,
        agg_id,
        [r[0] for r in reports],
        [r[1] for r in reports],
        [r[2] for r in reports],
    )


# -- Leader: the aggregation driver

Send = Callable[[str, str, bytes, dict[str, str]], tuple[int, bytes]]
"""``send(method, url, body, headers) -> (status, body)``: the HTTP client (tests inject one)."""


def _helper_headers(task: AggregatorTask, media_type: str) -> dict[str, str]:
    if task.auth_header == "dap-auth-token":  # a task added through the interop test API
        return {"DAP-Auth-Token": task.aggregator_token, "Content-Type": media_type}
    return {"Authorization": f"Bearer {task.aggregator_token}", "Content-Type": media_type}


def drive(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    send: Send,
    *,
    job_size: int = 1000,
    max_jobs: int | None = None,
    now: float | None = None,
) -> dict[str, int]:
    """Aggregate every pending report of ``task`` with the Helper, ``job_size`` a job (at most
    ``max_jobs`` jobs; None: all); first re-send the jobs a crash or a failed request left
    unfinished, and apply the retention (:func:`forget_expired`). Counts of reports
    ``aggregated`` and ``rejected``, and of ``jobs``; ``RuntimeError`` if the Helper does not
    answer a job (it stays pending and is re-sent, identically, by the next run)."""
    tid = task.spec.task_id_text
    forget_expired(conn, task, now=now)
    totals = {"aggregated": 0, "rejected": 0, "jobs": 0}
    while max_jobs is None or totals["jobs"] < max_jobs:
        row = conn.execute(
            "SELECT job_id, request FROM dap_jobs WHERE task_id = ? AND state = 'sent' "
            "ORDER BY rowid LIMIT 1",
            [tid],
        ).fetchone()
        if row is None:
            row = _new_job(conn, task, job_size, totals)
            if row is None:
                return totals
        job_id, request = bytes(row[0]), bytes(row[1])
        url = f"{task.spec.helper}tasks/{tid}/aggregation_jobs/{b64encode(job_id)}"
        status, body = send(
            "PUT", url, request, _helper_headers(task, AggregationJobInitReq.MEDIA_TYPE)
        )
        if status not in (200, 201):
            raise RuntimeError(
                f"the Helper answered aggregation job {b64encode(job_id)} with {status}: "
                f"{body[:300]!r}"
            )
        _finish_job(conn, task, job_id, request, body, totals)
    return totals


def _new_job(
    conn: sqlite3.Connection, task: AggregatorTask, job_size: int, totals: dict[str, int]
) -> tuple[bytes, bytes] | None:
    spec, tid = task.spec, task.spec.task_id_text
    vdaf = spec.build_vdaf()
    ctx = vdaf_context(spec.task_id)
    device = _device_task(task)
    with immediate(conn):
        rows = conn.execute(
            "SELECT report_id, report FROM dap_reports WHERE task_id = ? AND state = 'start' "
            "AND job_id IS NULL LIMIT ?",
            [tid, job_size],
        ).fetchall()
        if not rows:
            return None
        job_id = os.urandom(16)
        reports, shares = [], []
        for report_id, blob in rows:
            report = Report.decode(bytes(blob))
            try:
                plain = open_input_share(
                    device,
                    Role.LEADER,
                    task.hpke_private_key,
                    report.report_metadata,
                    report.public_share,
                    report.leader_encrypted_input_share,
                )
            except (HpkeError, DapDecodeError):
                conn.execute(
                    "UPDATE dap_reports SET state = 'rejected', report = NULL "
                    "WHERE task_id = ? AND report_id = ?",
                    [tid, report_id],
                )
                count_refused(conn, tid, ReportError.HPKE_DECRYPT_ERROR)
                totals["rejected"] += 1
                continue
            reports.append(report)
            shares.append(plain.payload)
        if reports:
            batch = _verify_batch(
                vdaf,
                task.verify_key,
                ctx,
                0,
                [
                    (r.report_metadata.report_id, r.public_share, s)
                    for r, s in zip(reports, shares, strict=True)
                ],
            )
            inits = tuple(
                VerifyInit(
                    ReportShare(r.report_metadata, r.public_share, r.helper_encrypted_input_share),
                    _ping(PING_INITIALIZE, vdaf.encode_verifier_share(vs)),
                )
                for r, vs in zip(reports, batch.verifier_shares, strict=True)
            )
            request = AggregationJobInitReq(0, b"", inits).encode()
            conn.execute(
                "INSERT INTO dap_jobs (task_id, job_id, request_hash, request, state) "
                "VALUES (?, ?, ?, ?, 'sent')",
                [tid, job_id, hashlib.sha256(request).digest(), request],
            )
            conn.executemany(
                "UPDATE dap_reports SET job_id = ? WHERE task_id = ? AND report_id = ?",
                [(job_id, tid, r.report_metadata.report_id) for r in reports],
            )
            return job_id, request
    return _new_job(conn, task, job_size, totals)  # every report refused: the next ones


def _finish_job(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    job_id: bytes,
    request: bytes,
    body: bytes,
    totals: dict[str, int],
) -> None:
    """Finish a job with the Helper's answer: the Leader's own verification states are
    recomputed from the reports (deterministic), so a crash before this point loses nothing."""
    spec, tid = task.spec, task.spec.task_id_text
    vdaf = spec.build_vdaf()
    ctx = vdaf_context(spec.task_id)
    device = _device_task(task)
    init: AggregationJobInitReq = AggregationJobInitReq.decode(request)
    resp = AggregationJobResp.decode(body)
    answers = {r.report_id: r for r in resp.verify_resps}
    with immediate(conn):
        state = conn.execute(
            "SELECT state FROM dap_jobs WHERE task_id = ? AND job_id = ?", [tid, job_id]
        ).fetchone()
        if state is None or state[0] != "sent":
            return  # another driver finished it
        reports = []
        for vi in init.verify_inits:
            row = conn.execute(
                "SELECT report FROM dap_reports WHERE task_id = ? AND report_id = ?",
                [tid, vi.report_share.report_metadata.report_id],
            ).fetchone()
            reports.append(Report.decode(bytes(row[0])))
        shares = [
            open_input_share(
                device,
                Role.LEADER,
                task.hpke_private_key,
                r.report_metadata,
                r.public_share,
                r.leader_encrypted_input_share,
            ).payload
            for r in reports
        ]
        batch = _verify_batch(
            vdaf,
            task.verify_key,
            ctx,
            0,
            [
                (r.report_metadata.report_id, r.public_share, s)
                for r, s in zip(reports, shares, strict=True)
            ],
        )
        accepted: list[tuple[bytes, int, list[int]]] = []
        rejected: list[bytes] = []
        reasons: list[ReportError] = []
        for report, verify_state in zip(reports, batch.states(), strict=True):
            rid = report.report_metadata.report_id
            answer = answers.get(rid)
            try:
                if answer is None or answer.verify_resp_type != VerifyRespType.CONTINUE:
                    raise ValueError("refused by the Helper")
                message = vdaf.decode_verifier_message(None, _unping(answer.payload, PING_FINISH))
                out_share = vdaf.verify_next(ctx, verify_state, message)
            except (VdafError, ValueError):
                rejected.append(rid)
                helper_said = answer.report_error if answer is not None else None
                reasons.append(helper_said or ReportError.VDAF_VERIFY_ERROR)
                continue
            accepted.append((rid, report.report_metadata.time, out_share))
        _add_to_buckets(conn, task, vdaf, accepted)
        for reason in reasons:
            _count_error(conn, tid, reason)
        conn.executemany(
            "UPDATE dap_reports SET state = ?, report = NULL WHERE task_id = ? AND report_id = ?",
            [("aggregated", tid, a[0]) for a in accepted]
            + [("rejected", tid, r) for r in rejected],
        )
        conn.execute(
            "UPDATE dap_jobs SET state = 'done', request = NULL WHERE task_id = ? AND job_id = ?",
            [tid, job_id],
        )
    totals["aggregated"] += len(accepted)
    totals["rejected"] += len(rejected)
    totals["jobs"] += 1


# -- collection


def _interval(req: CollectionJobReq) -> Interval:
    if req.query.batch_mode != BatchMode.TIME_INTERVAL:
        raise DapProblem(400, "invalidMessage", "only time-interval batches are supported")
    try:
        interval = req.query.interval()
    except DapDecodeError as error:
        raise DapProblem(400, "invalidMessage", str(error)) from None
    if interval.duration < 1:
        raise DapProblem(400, "batchInvalid", f"batch interval duration {interval.duration} < 1")
    return interval


def _overlapping(
    conn: sqlite3.Connection, tid: str, interval: Interval
) -> list[tuple[bytes, int, int, bytes, bytes | None]]:
    return conn.execute(
        "SELECT job_id, start, duration, request, response FROM dap_collections "
        "WHERE task_id = ? AND start < ? AND ? < start + duration",
        [tid, interval.start + interval.duration, interval.start],
    ).fetchall()


def _seal_share(
    task: AggregatorTask,
    req: CollectionJobReq,
    share: list[int],
    rng: RandomSource | None = None,
) -> HpkeCiphertext:
    """Noise the aggregate share (each aggregator its own draw; ``rng`` None: the OS CSPRNG)
    and seal it to the Collector (DAP-18 "Collecting Results")."""
    vdaf = task.spec.build_vdaf()
    share = task.spec.add_noise(share, vdaf.field.MODULUS, rng)
    config = task.collector_hpke_config
    aad = AggregateShareAad(task.spec.task_id, task.spec.configuration(), req).encode()
    role = Role.LEADER if task.role == "leader" else Role.HELPER
    enc, payload = seal_base(
        config.public_key, aggregate_share_info(role), aad, vdaf.encode_agg_share(share)
    )
    return HpkeCiphertext(config.id, enc, payload)


def create_collection(
    conn: sqlite3.Connection, task: AggregatorTask, job_id: bytes, body: bytes
) -> None:
    """Leader: record a collection job; refuse a batch overlapping a collected one."""
    req: CollectionJobReq = _decode(CollectionJobReq, body)
    interval = _interval(req)
    tid = task.spec.task_id_text
    with immediate(conn):
        for other, *_, request, _response in _overlapping(conn, tid, interval):
            if bytes(other) == job_id and bytes(request) == body:
                return  # the same PUT again
            raise DapProblem(
                400,
                "batchOverlap",
                f"batch interval [{interval.start}, {interval.start + interval.duration}) "
                f"overlaps collection job {b64encode(bytes(other))}",
            )
        if conn.execute(
            "SELECT 1 FROM dap_collections WHERE task_id = ? AND job_id = ?", [tid, job_id]
        ).fetchone():
            raise DapProblem(409, "invalidMessage", "collection job exists with another request")
        conn.execute(
            "INSERT INTO dap_collections (task_id, job_id, start, duration, request) "
            "VALUES (?, ?, ?, ?, ?)",
            [tid, job_id, interval.start, interval.duration, body],
        )


def collection_result(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    job_id: bytes,
    send: Send,
    rng: RandomSource | None = None,
) -> bytes | None:
    """Leader: the encoded ``CollectionJobResp``, or ``None`` while reports of the interval
    still wait for the driver or the Helper cannot answer (unreachable, or a 5xx). Below
    ``min_batch_size`` the job is deleted and refused; a Helper's refusal (4xx) is a 502."""
    tid = task.spec.task_id_text
    row = conn.execute(
        "SELECT start, duration, request, response FROM dap_collections "
        "WHERE task_id = ? AND job_id = ?",
        [tid, job_id],
    ).fetchone()
    if row is None:
        raise DapProblem(404, "unrecognizedCollectionJob", f"no collection job {b64encode(job_id)}")
    start, duration, request, response = row
    if response is not None:
        return bytes(response)
    interval = Interval(start, duration)
    pending = conn.execute(
        "SELECT count(*) FROM dap_reports WHERE task_id = ? AND state = 'start' "
        "AND time >= ? AND time < ?",
        [tid, start, start + duration],
    ).fetchone()[0]
    if pending:
        return None
    vdaf = task.spec.build_vdaf()
    share, count, checksum = _batch(conn, task, vdaf, interval)
    if count < task.spec.min_batch_size:
        with immediate(conn):
            conn.execute(
                "DELETE FROM dap_collections WHERE task_id = ? AND job_id = ? AND response IS NULL",
                [tid, job_id],
            )
        raise DapProblem(
            400,
            "invalidBatchSize",
            f"the batch holds {count} reports, fewer than min_batch_size "
            f"{task.spec.min_batch_size}",
        )
    req = CollectionJobReq.decode(bytes(request))
    share_req = AggregateShareReq(req, BatchSelector.time_interval(interval), count, checksum)
    try:
        status, body = send(
            "POST",
            f"{task.spec.helper}tasks/{tid}/aggregate_shares",
            share_req.encode(),
            _helper_headers(task, AggregateShareReq.MEDIA_TYPE),
        )
    except OSError as error:  # requests' errors are OSErrors: the Helper down, say
        status, body = 503, str(error).encode()
    if status >= 500:
        # The Helper crashed, restarts or is busy: the job stays pending and the next poll
        # asks again with the same request, which the Helper answers from its record if it
        # had stored its share. Failing here would strand the Collector: its job id holds
        # the interval, so a new collection job would be refused batchOverlap.
        logger.warning(
            "dap collection job %s: the Helper answered %s (%r); asking again at the next poll",
            b64encode(job_id),
            status,
            body[:200],
        )
        return None
    if status != 200:
        raise DapProblem(
            502, "helperError", f"the Helper refused the aggregate share: {status} {body[:300]!r}"
        )
    helper = AggregateShare.decode(body).encrypted_aggregate_share
    sealed = _seal_share(task, req, share, rng)
    result = CollectionJobResp(count, interval, sealed, helper).encode()
    with immediate(conn):
        conn.execute(
            "UPDATE dap_collections SET response = ? WHERE task_id = ? AND job_id = ? "
            "AND response IS NULL",
            [result, tid, job_id],
        )
        stored = conn.execute(
            "SELECT response FROM dap_collections WHERE task_id = ? AND job_id = ?",
            [tid, job_id],
        ).fetchone()
    return bytes(stored[0])  # a concurrent poll's answer, if it won: one noise draw


def answered_collections(conn: sqlite3.Connection, task: AggregatorTask) -> list[dict[str, int]]:
    """Leader: every collection of ``task`` answered so far (``start``, ``duration`` in time
    units, ``report_count``), oldest interval first: each released its batch once."""
    out = []
    for start, duration, response in conn.execute(
        "SELECT start, duration, response FROM dap_collections "
        "WHERE task_id = ? AND response IS NOT NULL ORDER BY start",
        [task.spec.task_id_text],
    ):
        count = CollectionJobResp.decode(bytes(response)).report_count
        out.append({"start": start, "duration": duration, "report_count": count})
    return out


def aggregate_share(
    conn: sqlite3.Connection,
    task: AggregatorTask,
    body: bytes,
    rng: RandomSource | None = None,
    *,
    now: float | None = None,
) -> bytes:
    """Helper: the encoded ``AggregateShare`` of a batch, once; the same request again gets
    the same answer, an overlapping or mismatched one is refused. Applies the Helper's
    retention (:func:`forget_expired`) first."""
    forget_expired(conn, task, now=now)
    req: AggregateShareReq = _decode(AggregateShareReq, body)
    if req.batch_selector.batch_mode != BatchMode.TIME_INTERVAL:
        raise DapProblem(400, "invalidMessage", "only time-interval batches are supported")
    interval = req.batch_selector.interval()
    tid = task.spec.task_id_text
    job_key = hashlib.sha256(body).digest()
    vdaf = task.spec.build_vdaf()
    with immediate(conn):
        for other, *_, _request, response in _overlapping(conn, tid, interval):
            if bytes(other) == job_key and response is not None:
                return bytes(response)
            raise DapProblem(
                400, "batchOverlap", f"batch interval {interval} overlaps a collected batch"
            )
        share, count, checksum = _batch(conn, task, vdaf, interval)
        if count != req.report_count or checksum != req.checksum:
            raise DapProblem(
                400,
                "batchMismatch",
                f"the Leader counts {req.report_count} reports, this Helper {count}"
                + ("" if count != req.report_count else " (checksums differ)"),
            )
        if count < task.spec.min_batch_size:
            raise DapProblem(
                400,
                "invalidBatchSize",
                f"{count} reports, fewer than min_batch_size {task.spec.min_batch_size}",
            )
        response = AggregateShare(_seal_share(task, req.collection_job_req, share, rng)).encode()
        conn.execute(
            "INSERT INTO dap_collections (task_id, job_id, start, duration, request, response) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [tid, job_key, interval.start, interval.duration, body, response],
        )
    return response
