"""Operational routes: liveness, readiness, Prometheus metrics and the API description."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app

from collector.dbguard import write_probe
from collector.problems import Problem
from collector.web import get_storage

bp = Blueprint("ops", __name__)

PROMETHEUS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"

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
    """Readiness: the database is the file the app opened, has the current schema, and takes a
    real committed write (``collector.dbguard.write_probe``), not only its write lock."""
    storage = get_storage()  # 503 database-unavailable if the file was deleted or replaced
    retry_after = {"Retry-After": str(current_app.config["RETRY_AFTER"])}
    try:
        write_probe(storage.db.conn)
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
    """Counters of accepted, duplicate and rejected reports per campaign (Prometheus text).

    The counters live in SQLite and are updated in each upload's transaction, so every
    gunicorn worker serves the same exact totals, and they survive restarts.
    """
    lines: list[str] = []
    by_name: dict[str, list[str]] = {name: [] for name in _COUNTER_HELP}
    for campaign, name, label, value in get_storage().counters():
        labels = f'campaign="{_escape(campaign)}"'
        if name == "rejected":
            labels += f',reason="{_escape(label)}"'
        by_name.setdefault(name, []).append(f"ldp_reports_{name}_total{{{labels}}} {value}")
    for name, samples in by_name.items():
        lines.append(f"# HELP ldp_reports_{name}_total {_COUNTER_HELP.get(name, name)}")
        lines.append(f"# TYPE ldp_reports_{name}_total counter")
        lines.extend(samples)
    return Response("\n".join(lines) + "\n", content_type=PROMETHEUS_MEDIA_TYPE)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
