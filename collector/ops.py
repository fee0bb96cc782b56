"""Operational routes: liveness, readiness, Prometheus metrics and the API description."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app

from collector import metrics as _metrics
from collector.dap.driver import CONSECUTIVE_FAILURES, DRIVER_FAILURES, DRIVER_JOBS
from collector.dbguard import space_probe, write_probe
from collector.problems import Problem
from collector.storage import RETENTION_COUNTER
from collector.web import get_storage

bp = Blueprint("ops", __name__)

_COUNTER_HELP = {
    "accepted": "Reports stored (first copy of their id).",
    "duplicate": "Reports acknowledged as duplicates of an already stored id.",
    "rejected": "Reports rejected, by reason code.",
}


@bp.get("/healthz")
def healthz() -> dict[str, Any]:
    """Liveness: the process answers (no database access)."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> dict[str, Any]:
    """Readiness: the database is the file the app opened, has the current schema, takes a real
    committed write (``collector.dbguard.write_probe``), not only its write lock, and its disk
    has new space for the next uploads (``collector.dbguard.space_probe``: a full disk is not
    seen by a write the reused WAL absorbs)."""
    storage = get_storage()  # 503 database-unavailable if the file was deleted or replaced
    retry_after = {"Retry-After": str(current_app.config["RETRY_AFTER"])}
    try:
        write_probe(storage.db.conn)
        space_probe(current_app.config["DB"])
    except sqlite3.OperationalError as error:
        if "locked" in str(error).lower() or "busy" in str(error).lower():
            raise Problem(
                503, "overloaded", f"the database is busy: {error}", headers=retry_after
            ) from None
        raise Problem(
            503,
            "database-unavailable",
            f"the database is not writable: {error}",
            headers=retry_after,
        ) from None
    except (sqlite3.Error, OSError) as error:
        raise Problem(
            503,
            "database-unavailable",
            f"the database is not writable: {error}",
            headers=retry_after,
        ) from None
    return {"status": "ready"}


@bp.get("/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3.1 description of every route, body and problem type
    (``collector/openapi.json``; tests/collector/test_openapi.py keeps it and the app in step)."""
    return Response(_openapi_text(), content_type="application/json")


@functools.cache
def _openapi_text() -> bytes:
    return (Path(__file__).parent / "openapi.json").read_bytes()


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus text: requests by route and status and their latency, summed over every
    gunicorn worker (``collector.metrics``), and, read from the database now, the report
    counters per campaign, the database's size and the pending work per campaign.

    The report counters live in SQLite and are updated in each upload's transaction, so they
    are exact whichever worker answers, and survive restarts.
    """
    storage = get_storage()
    families = (
        _metrics.Families(lambda: _report_counters(storage.counters())),
        _metrics.Families(lambda: _pending(storage)),
        _metrics.Families(lambda: _dap(storage.db.conn)),
        _metrics.Families(lambda: _dap_jobs(storage.db.conn)),
        _metrics.Families(lambda: [_metrics.database_size(current_app.config["DB"], "collector")]),
    )
    return Response(_metrics.exposition(*families), content_type=_metrics.PROMETHEUS_MEDIA_TYPE)


def _report_counters(rows: list[tuple[str, str, str, int]]) -> list[Any]:
    from prometheus_client.core import CounterMetricFamily

    families = {
        name: CounterMetricFamily(
            f"ldp_reports_{name}",
            text,
            labels=["campaign", "reason"] if name == "rejected" else ["campaign"],
        )
        for name, text in _COUNTER_HELP.items()
    }
    families[RETENTION_COUNTER] = CounterMetricFamily(
        "ldp_collector_retention_deleted_reports",
        "Raw reports deleted by the retention cleanup (older than the campaign's retention_days).",
        labels=["campaign"],
    )
    for campaign, name, label, value in rows:
        family = families.get(name)
        if family is not None:
            family.add_metric([campaign, label] if name == "rejected" else [campaign], value)
    return list(families.values())


def _pending(storage: Any) -> list[Any]:
    """Per existing campaign: reports stored, the minimum batch, and the reports withheld
    (stored while the campaign is below its ``min_batch_size``: no estimate is released yet)."""
    from prometheus_client.core import GaugeMetricFamily

    stored = GaugeMetricFamily(
        "ldp_campaign_reports", "Reports stored per campaign.", labels=["campaign"]
    )
    minimum = GaugeMetricFamily(
        "ldp_campaign_min_batch_size",
        "The reports a campaign needs before any estimate is released.",
        labels=["campaign"],
    )
    withheld = GaugeMetricFamily(
        "ldp_campaign_withheld_reports",
        "Reports waiting for their campaign to reach min_batch_size (0 once released).",
        labels=["campaign"],
    )
    counts = storage.report_counts()
    for campaign in storage.list_campaigns():
        n = counts.get(campaign.name, 0)
        stored.add_metric([campaign.name], n)
        minimum.add_metric([campaign.name], campaign.min_batch_size)
        withheld.add_metric([campaign.name], n if n < campaign.min_batch_size else 0)
    return [stored, minimum, withheld]


def _dap_jobs(conn: Any) -> list[Any]:
    """Per DAP task: aggregation jobs held by state (collector.dap.aggregator's retention)."""
    from prometheus_client.core import GaugeMetricFamily

    jobs = GaugeMetricFamily(
        "ldp_dap_jobs",
        "DAP aggregation jobs held per task and state (sent: the Leader awaits the Helper; "
        "done: kept for a re-sent request until retention deletes it).",
        labels=["task", "state"],
    )
    for task, state, n in conn.execute(
        "SELECT task_id, state, count(*) FROM dap_jobs GROUP BY task_id, state"
    ):
        jobs.add_metric([task, state], n)
    return [jobs]


def _dap(conn: Any) -> list[Any]:
    """Per DAP task: reports by state (start, aggregated, rejected) and refusals by reason."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    reports = GaugeMetricFamily(
        "ldp_dap_reports",
        "DAP report ids held per task and state (start: awaiting aggregation).",
        labels=["task", "state"],
    )
    refused = CounterMetricFamily(
        "ldp_dap_reports_refused",
        "DAP reports refused or rejected per task, by DAP ReportError "
        "(report_expired: report_dropped for a report past the task's expiry).",
        labels=["task", "reason"],
    )
    for task, state, n in conn.execute(
        "SELECT task_id, state, count(*) FROM dap_reports GROUP BY task_id, state"
    ):
        reports.add_metric([task, state], n)
    driver: dict[str, Any] = {
        DRIVER_JOBS: CounterMetricFamily(
            "ldp_dap_driver_jobs",
            "Aggregation jobs the Leader's driver in serve finished, per task.",
            labels=["task"],
        ),
        DRIVER_FAILURES: CounterMetricFamily(
            "ldp_dap_driver_failures",
            "Failed runs of the Leader's driver in serve (the Helper unreachable or refusing).",
            labels=["task"],
        ),
        CONSECUTIVE_FAILURES: GaugeMetricFamily(
            "ldp_dap_driver_consecutive_failures",
            "Failed runs of the Leader's driver since its last success (0: healthy).",
            labels=["task"],
        ),
    }
    failing: dict[str, int] = {}
    for task, reason, n in conn.execute("SELECT task_id, reason, value FROM dap_counters"):
        if reason == CONSECUTIVE_FAILURES:
            failing[task] = n
        elif reason in driver:
            driver[reason].add_metric([task], n)
        else:
            refused.add_metric([task, reason], n)
    for (task,) in conn.execute("SELECT task_id FROM dap_tasks WHERE role = 'leader'"):
        driver[CONSECUTIVE_FAILURES].add_metric([task], failing.get(task, 0))
    return [reports, refused, *driver.values()]


@bp.record_once
def _instrument(state: Any) -> None:
    _metrics.instrument(state.app, "collector")
