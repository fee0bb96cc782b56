"""Prometheus metrics of the collector and the shuffler, exact across gunicorn workers.

Every worker process counts its own requests; a scrape lands on one worker, which must answer
for all of them. With ``PROMETHEUS_MULTIPROC_DIR`` set, ``prometheus_client`` keeps each
process's values in memory-mapped files in that folder and :func:`exposition` merges them
(``MultiProcessCollector``), so the sums are exact whichever worker answers, and counters of a
worker gunicorn restarted stay counted. ``collector.server.GunicornApp(...,
multiprocess_metrics=True)`` makes a fresh private folder per server start (so counts never
carry over from an earlier run or another server; folders of killed servers are removed at the
next start), marks a dead worker's live gauges gone
(gunicorn's ``child_exit`` hook) and removes the folder when the server stops.

What is counted, with bounded labels only:

* ``ldp_http_requests_total{app, route, method, status}`` and
  ``ldp_http_request_duration_seconds{app, route, method}`` (a histogram of the time the app
  took to make the response; a streamed body, such as an export, counts until its first
  part). ``route`` is the URL rule (``/v1/campaigns/<name>/reports``), never the raw path: a
  path no rule matches is ``<unmatched>``, an unknown method ``OTHER``.
* At scrape time, from the database: the stored-report counters (accepted, duplicate, rejected
  by reason; kept in SQLite by each upload's transaction), the database's size on disk, and the
  pending work per campaign, labelled with names of campaigns that exist (see
  :func:`collector_families` and the shuffler's ``/metrics``).

Without the environment variable (tests with Flask's client, one process) the same metrics live
in this process's registry. Requests that gunicorn itself refuses before the app sees them
(``collector.server.ProblemWorker.handle_error``) are not counted.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask
    from prometheus_client.registry import Collector

__all__ = [
    "MULTIPROC_ENV",
    "PROMETHEUS_MEDIA_TYPE",
    "UNMATCHED",
    "Families",
    "database_size",
    "exposition",
    "instrument",
    "multiprocess_folder",
    "remove_folder",
    "worker_exited",
]

logger = logging.getLogger(__name__)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
PROMETHEUS_MEDIA_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED = "<unmatched>"
ROUTE_KEY = "ldp.metrics.route"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; the ingest path answers in milliseconds, an export stream may take seconds."""

_lock = threading.Lock()
_request_metrics: tuple[Any, Any, Any] | None = None  # (registry, requests, latency)


def _metrics() -> tuple[Any, Any, Any]:
    """This process's request counter and latency histogram, made on first use.

    Made lazily, in the worker: ``prometheus_client`` picks its value store (in memory or in
    the multiprocess folder) once, when it is imported, so the folder must be in the
    environment by then; a copy imported earlier is switched here.
    """
    global _request_metrics
    with _lock:
        if _request_metrics is None:
            from prometheus_client import CollectorRegistry, Counter, Histogram, values

            if os.environ.get(MULTIPROC_ENV) and values.ValueClass is values.MutexValue:
                values.ValueClass = values.MultiProcessValue()
            registry = CollectorRegistry(auto_describe=True)
            requests = Counter(
                "ldp_http_requests",
                "HTTP requests answered, by URL rule, method and status.",
                ["app", "route", "method", "status"],
                registry=registry,
            )
            latency = Histogram(
                "ldp_http_request_duration_seconds",
                "Time the app took to answer a request, by URL rule.",
                ["app", "route", "method"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            )
            _request_metrics = (registry, requests, latency)
        return _request_metrics


def instrument(app: Flask, name: str) -> None:
    """Count and time every request ``app`` answers, labelled ``app=name``. The metrics are
    made at the first request (in the worker, after gunicorn set the multiprocess folder)."""

    def note_route() -> None:
        from flask import request

        rule = request.url_rule
        request.environ[ROUTE_KEY] = rule.rule if rule is not None else UNMATCHED

    app.before_request(note_route)
    inner = app.wsgi_app

    def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start = time.perf_counter()
        status: list[str] = []

        def recording_start_response(code: str, headers: Any, *rest: Any) -> Any:
            status[:] = [code.split(" ", 1)[0]]
            return start_response(code, headers, *rest)

        def done() -> None:
            route = environ.get(ROUTE_KEY, UNMATCHED)
            method = environ.get("REQUEST_METHOD", "")
            method = method if method in METHODS else "OTHER"
            code = status[0] if status and status[0].isdigit() else "500"
            _, requests, latency = _metrics()
            requests.labels(name, route, method, code).inc()
            latency.labels(name, route, method).observe(time.perf_counter() - start)

        try:
            return inner(environ, recording_start_response)
        finally:  # counted before the server sends it: a client that has its answer is counted
            try:
                done()
            except Exception:  # metrics never cost a request its answer
                logger.exception("could not count a request")

    app.wsgi_app = wsgi_app  # type: ignore[method-assign]


def exposition(*families: Collector) -> bytes:
    """The Prometheus text of every worker's request metrics and ``families`` (collectors
    evaluated now, in this process: figures read from a database at scrape time)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    own_registry = _metrics()[0]
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)
    else:
        registry.register(_Forward(own_registry))
    for family in families:
        registry.register(family)
    return generate_latest(registry)


class _Forward:
    """Another registry's metrics, collected as one more collector."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Any]:
        return self._registry.collect()


class Families:
    """A collector from a function returning metric families (called at each scrape)."""

    def __init__(self, collect: Callable[[], Iterable[Any]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Any]:
        return list(self._collect())


def database_size(path: str | os.PathLike[str], app: str) -> Any:
    """``ldp_database_size_bytes{app, file}``: the SQLite file and its write-ahead log."""
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(
        "ldp_database_size_bytes",
        "Bytes on disk of the SQLite database and its write-ahead log.",
        labels=["app", "file"],
    )
    for file, suffix in (("db", ""), ("wal", "-wal")):
        with contextlib.suppress(OSError):
            family.add_metric([app, file], os.path.getsize(os.fspath(path) + suffix))
    return family


# ---- the multiprocess folder, from gunicorn's master -------------------------------------------


def multiprocess_folder() -> str:
    """A fresh private folder for this server's metric files, set in the environment (so the
    workers forked from here find it). Call in gunicorn's master before workers start."""
    _remove_abandoned()
    folder = tempfile.mkdtemp(prefix=f"ldp-metrics-{os.getpid()}-")  # 0700
    os.environ[MULTIPROC_ENV] = folder
    return folder


def _remove_abandoned() -> None:
    """Folders of servers that were killed (no clean-up ran): their master process is gone."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "ldp-metrics-*-*")):
        pid = os.path.basename(path).split("-")[2]
        if not pid.isdigit() or os.stat(path).st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue


def worker_exited(pid: int) -> None:
    """gunicorn's ``child_exit``: the dead worker's live gauges are dropped (its counters and
    histograms stay: they were answered)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def remove_folder(folder: str) -> None:
    """The server stopped: its metric files go, and the environment forgets the folder."""
    if os.environ.get(MULTIPROC_ENV) == folder:
        del os.environ[MULTIPROC_ENV]
    shutil.rmtree(folder, ignore_errors=True)
