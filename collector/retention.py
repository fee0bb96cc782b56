"""The retention cleanup inside ``ldp-collector serve``: raw reports past their campaign's
``retention_days`` are deleted every ``LDP_RETENTION_INTERVAL`` seconds (``--retention-interval``;
0 turns it off), with no cron job.

A background task of the workers (``collector.leases``): each worker's thread asks for the
``retention`` lease, granted to one worker at a time once the cleanup is due, so the cleanup
runs at most once per interval whatever the number of workers, restarts included. The deletions
are counted in ``ldp_collector_retention_deleted_reports_total`` (``Storage.apply_retention``).
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from collector.leases import LEASE_SECONDS, LeaseWorker, run_if_due
from collector.storage import Storage

__all__ = ["LEASE", "LEASE_SECONDS", "RetentionWorker", "clean_if_due"]

logger = logging.getLogger(__name__)

LEASE = "retention"
"""The name of the cleanup's row in the ``leases`` table."""


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
    The next cleanup is due ``interval`` seconds after ``now`` (after a failed one too)."""
    return run_if_due(
        storage,
        LEASE,
        holder,
        now=now,
        work=lambda: (storage.apply_retention(today), now + interval),
        retry_at=now + interval,
    )


class RetentionWorker(LeaseWorker):
    """The cleanup thread of one worker process. ``config`` is the app's (``DB``,
    ``BUSY_TIMEOUT``, ``SYNCHRONOUS``, ``TODAY``, ``RETENTION_INTERVAL``)."""

    thread_name = "ldp-retention"

    def __init__(
        self, config: Mapping[str, Any], *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(config, float(config["RETENTION_INTERVAL"]), clock=clock)

    def work(self, storage: Storage, now: float) -> dict[str, int] | None:
        """One check: the cleanup's result if this worker ran it, else None."""
        deleted = clean_if_due(
            storage,
            self.holder,
            now=now,
            interval=self.interval,
            today=utc_today(self.config.get("TODAY")),
        )
        for name, count in (deleted or {}).items():
            if count:
                logger.warning("campaign %r: retention deleted %d raw reports", name, count)
        return deleted
