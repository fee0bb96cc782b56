"""The Leader's aggregation driver as a service: ``ldp-collector serve`` aggregates every
Leader task's pending reports with its Helper in the background, every
``LDP_DAP_DRIVE_INTERVAL`` seconds (``--dap-drive-interval``, default 2; 0 turns it off and
leaves it to ``ldp-collector dap drive``).

A background task of the workers (``collector.leases``) with one lease per Leader task,
``dap-drive:<task id>``: one worker drives a task at a time (tasks may be driven by different
workers at once), so no job is sent twice by two drivers. (A job sent twice would still count
nothing twice: jobs are stored before they are sent and the Helper answers a re-sent job with
the same bytes; the lease saves the Helper the work.) One run drives at most
:data:`MAX_JOBS_PER_RUN` jobs of :data:`JOB_SIZE` reports and renews the lease
(:data:`LEASE_SECONDS`) after each job; a task with more to do is due again at once. A worker
that dies while driving loses the lease when it runs out; another then re-sends its job.

A failed run (the Helper unreachable, or answering with an error) is logged and retried with
exponential backoff, ``interval * 2**failures`` capped at :data:`MAX_BACKOFF_SECONDS`; the
consecutive failures are kept in the database, so the backoff holds whichever worker retries.
Collection jobs need no driving: the Leader asks the Helper for its aggregate share when the
Collector polls (``aggregator.collection_result``).

Metrics (``/metrics``, from ``dap_counters``): ``ldp_dap_driver_jobs_total{task}`` (aggregation
jobs the driver finished), ``ldp_dap_driver_failures_total{task}`` (failed runs) and
``ldp_dap_driver_consecutive_failures{task}`` (0 once a run succeeds).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from client_sdk.sqlite import immediate
from collector.dap import aggregator
from collector.dap.aggregator import Send
from collector.leases import LeaseWorker, run_if_due
from collector.storage import Storage

__all__ = [
    "CONSECUTIVE_FAILURES",
    "DRIVER_FAILURES",
    "DRIVER_JOBS",
    "DriveWorker",
    "backoff",
    "drive_due_tasks",
    "lease_name",
]

logger = logging.getLogger(__name__)

JOB_SIZE = 1000
"""Reports per aggregation job (``ldp-collector dap drive --job-size``'s default)."""
MAX_JOBS_PER_RUN = 10
"""Jobs per run of one task (others may then have their turn); a task with more is due again
at once."""
LEASE_SECONDS = 120.0
"""A task's lease, renewed after each job: longer than one job takes (the Helper's timeout is
30 s), and how long a task waits after a worker died driving it."""
MAX_BACKOFF_SECONDS = 300.0
DRIVER_JOBS, DRIVER_FAILURES = "driver_jobs", "driver_failures"
CONSECUTIVE_FAILURES = "driver_consecutive_failures"
"""Rows of ``dap_counters`` (per task): counters of jobs and failed runs, and the failures
since the last success (the backoff's exponent)."""
DRIVER_ROWS = (DRIVER_JOBS, DRIVER_FAILURES, CONSECUTIVE_FAILURES)


def lease_name(task_id: str) -> str:
    """The ``leases`` row of a task's driver."""
    return f"dap-drive:{task_id}"


def backoff(interval: float, failures: int) -> float:
    """Seconds to wait after ``failures`` consecutive failed runs: the interval doubled per
    failure, at most :data:`MAX_BACKOFF_SECONDS` (and never below the interval)."""
    return max(interval, min(interval * 2.0 ** min(failures, 32), MAX_BACKOFF_SECONDS))


def _failures(conn: sqlite3.Connection, task_id: str) -> int:
    row = conn.execute(
        "SELECT value FROM dap_counters WHERE task_id = ? AND reason = ?",
        [task_id, CONSECUTIVE_FAILURES],
    ).fetchone()
    return int(row[0]) if row else 0


def _record(conn: sqlite3.Connection, task_id: str, *, jobs: int, failed: bool) -> int:
    """Count a run's jobs and its outcome; the consecutive failures after it."""
    with immediate(conn):
        aggregator.count_refused(conn, task_id, DRIVER_JOBS, jobs)
        if not failed:
            conn.execute(
                "DELETE FROM dap_counters WHERE task_id = ? AND reason = ?",
                [task_id, CONSECUTIVE_FAILURES],
            )
            return 0
        aggregator.count_refused(conn, task_id, DRIVER_FAILURES)
        aggregator.count_refused(conn, task_id, CONSECUTIVE_FAILURES)
    return _failures(conn, task_id)


def drive_task(
    conn: sqlite3.Connection,
    task_id: str,
    send: Send,
    *,
    now: float,
    interval: float,
    job_size: int = JOB_SIZE,
    max_jobs: int = MAX_JOBS_PER_RUN,
    keep_lease: Callable[[], bool] = lambda: True,
) -> tuple[dict[str, int], float]:
    """One run of a task's driver, job by job (``keep_lease`` renews the lease after each; the
    run stops if it was lost): its totals (``aggregator.drive``'s, and ``failed``: 0 or 1) and
    when it is next due. A failure is logged, counted and backed off, never raised."""
    totals = {"aggregated": 0, "rejected": 0, "jobs": 0}
    try:
        task = aggregator.load_task(conn, task_id, "leader")
        for _ in range(max_jobs):
            step = aggregator.drive(conn, task, send, job_size=job_size, max_jobs=1)
            totals = {name: totals[name] + step[name] for name in totals}
            if not step["jobs"] or not keep_lease():
                break
    except Exception as error:  # the Helper down, an error answer, a locked database...
        failures = _record(conn, task_id, jobs=totals["jobs"], failed=True)
        delay = backoff(interval, failures)
        logger.warning(
            "dap task %s: aggregation failed (%s: %s); %d failure(s) in a row, retry in %.0f s",
            task_id,
            type(error).__name__,
            str(error)[:300],
            failures,
            delay,
        )
        return {**totals, "failed": 1}, now + delay
    if totals["jobs"] or _failures(conn, task_id):  # an idle run writes nothing
        _record(conn, task_id, jobs=totals["jobs"], failed=False)
    more = totals["jobs"] >= max_jobs  # a full run: the next one is due at once
    return {**totals, "failed": 0}, now if more else now + interval


def drive_due_tasks(
    storage: Storage,
    holder: str,
    send: Send,
    *,
    now: float,
    interval: float,
    job_size: int = JOB_SIZE,
    max_jobs: int = MAX_JOBS_PER_RUN,
    clock: Callable[[], float] = time.time,
) -> dict[str, dict[str, int]]:
    """Drive, for ``holder``, every Leader task that is due and that no other worker drives:
    task id -> its run's totals (:func:`drive_task`). Tasks not run here are left out.
    ``clock`` renews the leases during a run."""
    conn = storage.db.conn
    task_ids = [
        row[0]
        for row in conn.execute(
            "SELECT task_id FROM dap_tasks WHERE role = 'leader' ORDER BY task_id"
        ).fetchall()
    ]
    driven: dict[str, dict[str, int]] = {}
    for task_id in task_ids:
        name = lease_name(task_id)

        def work(task_id: str = task_id, name: str = name) -> tuple[dict[str, int], float]:
            def keep_lease() -> bool:
                return storage.renew_lease(name, holder, now=clock(), ttl=LEASE_SECONDS)

            return drive_task(
                conn, task_id, send, now=now, interval=interval, job_size=job_size,
                max_jobs=max_jobs, keep_lease=keep_lease,
            )  # fmt: skip

        ran = run_if_due(
            storage, name, holder, now=now, work=work, retry_at=now + interval, ttl=LEASE_SECONDS
        )
        if ran is not None:
            driven[task_id] = ran
    return driven


class DriveWorker(LeaseWorker):
    """The driver thread of one worker process. ``config`` is the app's (``DB``,
    ``BUSY_TIMEOUT``, ``SYNCHRONOUS``, ``DAP_DRIVE_INTERVAL``); ``send`` the HTTP client to
    the Helpers (tests inject one)."""

    thread_name = "ldp-dap-driver"

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        clock: Callable[[], float] = time.time,
        send: Send | None = None,
    ) -> None:
        super().__init__(config, float(config["DAP_DRIVE_INTERVAL"]), clock=clock)
        if send is None:
            from collector.dap.api import send as http_send

            send = http_send
        self.send = send

    def work(self, storage: Storage, now: float) -> dict[str, dict[str, int]]:
        return drive_due_tasks(
            storage, self.holder, self.send, now=now, interval=self.interval, clock=self.clock
        )
