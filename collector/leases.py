"""Background tasks of ``ldp-collector serve``, run by one gunicorn worker at a time.

Every worker starts a daemon thread per task after it is forked (gunicorn's ``post_worker_init``
hook: nothing runs in the master, whose threads broke its restarts). The threads wake every
:func:`tick` seconds and ask the database for the task's lease (``Storage.take_lease``, table
``leases``): it is granted to one worker at a time, only once the task is due, so a task runs
at most once per interval whatever the number of workers, restarts included (the next due time
is stored). A worker that dies while it holds a lease loses it after the lease's time to live;
another worker then runs the task.

Two tasks use it: the retention cleanup (``collector.retention``) and the DAP Leader's
aggregation driver (``collector.dap.driver``).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from collector.storage import Storage

__all__ = ["LEASE_SECONDS", "LeaseWorker", "post_worker_init", "run_if_due", "tick"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

LEASE_SECONDS = 600.0
"""How long a worker holds a lease while it works: a crashed worker's lease expires then. Longer
than one run of any task takes (a task that could run longer bounds its own run)."""
MAX_TICK_SECONDS = 60.0


def tick(interval: float) -> float:
    """How often a worker asks whether a task is due: the interval, at most a minute (a task
    then starts at most a minute late)."""
    return min(interval, MAX_TICK_SECONDS)


def run_if_due(
    storage: Storage,
    name: str,
    holder: str,
    *,
    now: float,
    work: Callable[[], tuple[T, float]],
    retry_at: float,
    ttl: float = LEASE_SECONDS,
) -> T | None:
    """Run ``work`` for ``holder`` under the lease ``name`` if the task is due and nobody else
    runs it; None otherwise. ``work`` returns its result and when the task is next due (epoch
    seconds). If it raises, the lease is released with the task due again at ``retry_at`` (not
    at once, in a loop) and the error propagates."""
    if not _may_be_due(storage, name, now) or not storage.take_lease(
        name, holder, now=now, ttl=ttl
    ):
        return None
    next_due = retry_at
    try:
        result, next_due = work()
    finally:
        storage.finish_lease(name, holder, next_due=next_due)
    return result


def _may_be_due(storage: Storage, name: str, now: float) -> bool:
    """A read first: most rounds find the task not due or held, and need no write transaction
    (``take_lease`` decides, in one)."""
    row = storage.db.conn.execute(
        "SELECT holder, held_until, next_due FROM leases WHERE name = ?", [name]
    ).fetchone()
    if row is None:
        return True
    holder, held_until, next_due = row
    return next_due <= now and (holder is None or held_until <= now)


def worker_id() -> str:
    """A lease holder's name: host, process and a random part (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


_Worker = TypeVar("_Worker", bound="LeaseWorker")


class LeaseWorker:
    """The thread of one worker process for one background task: :meth:`start` it, :meth:`stop`
    it. Subclasses give :attr:`thread_name` and :meth:`work` (one round: ask for the lease
    with :func:`run_if_due`, and run the task if granted).

    ``config`` is the app's (``DB``, ``BUSY_TIMEOUT``, ``SYNCHRONOUS``, ...); ``interval`` the
    seconds between runs (0: no thread); ``clock`` gives epoch seconds (tests pass their own).
    """

    thread_name = "ldp-background"

    def __init__(
        self,
        config: Mapping[str, Any],
        interval: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = dict(config)
        self.interval = float(interval)
        self.clock = clock
        self.holder = worker_id()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def work(self, storage: Storage, now: float) -> Any:
        """One round at time ``now``; what the task did, or None when it did not run here."""
        raise NotImplementedError

    def run_once(self) -> Any:
        """One round against a fresh connection (the thread's own: SQLite connections are not
        shared between threads)."""
        with Storage(
            self.config["DB"],
            busy_timeout=self.config["BUSY_TIMEOUT"],
            synchronous=self.config["SYNCHRONOUS"],
            create=False,
        ) as storage:
            return self.work(storage, self.clock())

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                self.run_once()
            except Exception:  # the next tick retries; the worker keeps serving
                logger.exception("%s failed", self.thread_name)
            self.stopped.wait(tick(self.interval))

    def start(self: _Worker) -> _Worker:
        """Start the daemon thread (none when the interval is 0)."""
        if self.interval > 0:
            self.thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
            self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout)


def post_worker_init(
    config: Mapping[str, Any], workers: Iterable[Callable[[Mapping[str, Any]], LeaseWorker]]
) -> Callable[[Any], None]:
    """gunicorn's ``post_worker_init`` hook for an app of ``config``: each worker, once forked,
    starts one thread per background task of ``workers`` (a task whose interval is 0: none)."""
    makers = list(workers)

    def hook(worker: Any) -> None:
        for make in makers:
            make(config).start()

    return hook
