"""The retention cleanup inside ``ldp-collector serve``: raw reports past their campaign's
``retention_days`` are deleted every ``LDP_RETENTION_INTERVAL`` seconds (``--retention-interval``;
0 turns it off), with no cron job.

Every gunicorn worker starts a daemon thread after it is forked (gunicorn's
``post_worker_init`` hook: nothing runs in the master, whose threads broke its restarts). The
threads wake every :func:`tick` seconds and ask the database for the ``retention`` lease
(``Storage.take_lease``): it is granted to one worker at a time, only once the cleanup is due,
so the cleanup runs at most once per interval whatever the number of workers, restarts
included (the next due time is stored). A worker that dies while cleaning loses the lease after
:data:`LEASE_SECONDS`; another worker then cleans. The deletions are counted in
``ldp_collector_retention_deleted_reports_total`` (``Storage.apply_retention``).
"""

from __future__ import annotations

import datetime
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from collector.storage import Storage

__all__ = ["LEASE", "LEASE_SECONDS", "RetentionWorker", "clean_if_due", "post_worker_init"]

logger = logging.getLogger(__name__)

LEASE = "retention"
"""The name of the cleanup's row in the ``leases`` table."""
LEASE_SECONDS = 600.0
"""How long a worker holds the lease while it cleans: a crashed worker's lease expires then.
Longer than any cleanup takes (one indexed DELETE per campaign)."""
MAX_TICK_SECONDS = 60.0


def tick(interval: float) -> float:
    """How often a worker asks whether the cleanup is due: the interval, at most a minute (a
    cleanup then starts at most a minute late)."""
    return min(interval, MAX_TICK_SECONDS)


def utc_today(override: str | None = None) -> datetime.date:
    """The UTC date retention goes by (``LDP_TODAY`` overrides it in drills)."""
    if override:
        return datetime.date.fromisoformat(override)
    return datetime.datetime.now(datetime.timezone.utc).date()


def clean_if_due(
    storage: Storage,
    holder: str,
    *,
    now: float,
    interval: float,
    today: datetime.date,
) -> dict[str, int] | None:
    """Run the cleanup for ``holder`` if it is due and nobody else runs it; return campaign ->
    reports deleted, or None when another worker has the lease or the cleanup is not due.
    The next cleanup is due ``interval`` seconds after ``now``."""
    if not storage.take_lease(LEASE, holder, now=now, ttl=LEASE_SECONDS):
        return None
    try:
        deleted = storage.apply_retention(today)
    finally:
        # A failed cleanup is due again one interval later, not at once in a loop.
        storage.finish_lease(LEASE, holder, next_due=now + interval)
    return deleted


class RetentionWorker:
    """The cleanup thread of one worker process: :meth:`start` it, :meth:`stop` it.

    ``config`` is the app's (``DB``, ``BUSY_TIMEOUT``, ``SYNCHRONOUS``, ``TODAY``,
    ``RETENTION_INTERVAL``); ``clock`` gives epoch seconds (tests pass their own).
    """

    def __init__(
        self, config: Mapping[str, Any], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = dict(config)
        self.interval = float(self.config["RETENTION_INTERVAL"])
        self.clock = clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def run_once(self) -> dict[str, int] | None:
        """One check: the cleanup's result if this worker ran it, else None."""
        with Storage(
            self.config["DB"],
            busy_timeout=self.config["BUSY_TIMEOUT"],
            synchronous=self.config["SYNCHRONOUS"],
            create=False,
        ) as storage:
            deleted = clean_if_due(
                storage,
                self.holder,
                now=self.clock(),
                interval=self.interval,
                today=utc_today(self.config.get("TODAY")),
            )
        for name, count in (deleted or {}).items():
            if count:
                logger.warning("campaign %r: retention deleted %d raw reports", name, count)
        return deleted

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                self.run_once()
            except Exception:  # the next tick retries; the worker keeps serving
                logger.exception("retention cleanup failed")
            self.stopped.wait(tick(self.interval))

    def start(self) -> RetentionWorker:
        """Start the daemon thread (none when the interval is 0)."""
        if self.interval > 0:
            self.thread = threading.Thread(target=self._loop, name="ldp-retention", daemon=True)
            self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout)


def post_worker_init(config: Mapping[str, Any]) -> Callable[[Any], None]:
    """gunicorn's ``post_worker_init`` hook for an app of ``config``: each worker, once forked,
    starts its cleanup thread (the interval 0: none)."""

    def hook(worker: Any) -> None:
        RetentionWorker(config).start()

    return hook
