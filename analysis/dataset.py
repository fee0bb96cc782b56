"""Stored campaigns and their reports, read from a collector database (``collector.storage``).

The analysis side opens the database read-only in spirit (``create=False``: a missing file or an
out-of-date schema is an error, never a new empty database) and streams reports in chunks, so
memory stays O(chunk) however many reports a campaign holds (docs/architecture.md)::

    campaign = load_campaign("collector.db", "app-launches")
    est = estimate(campaign.mechanism, iter_report_chunks("collector.db", "app-launches"))
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from client_sdk.mechanisms import Reports
from collector.storage import Storage, StoredCampaign

__all__ = [
    "StoredCampaign",
    "count_reports",
    "iter_report_chunks",
    "load_campaign",
    "report_days",
]


def load_campaign(db_path: str | os.PathLike[str], name: str) -> StoredCampaign:
    """The campaign ``name``; ``LookupError`` naming it if the database has no such campaign."""
    with Storage(db_path, create=False) as storage:
        return storage.get_campaign(name)


def count_reports(
    db_path: str | os.PathLike[str],
    name: str,
    *,
    since: str | None = None,
    until: str | None = None,
) -> int:
    """How many reports the campaign has stored (``LookupError`` for an unknown campaign);
    ``since``/``until``: only those UTC days (``YYYY-MM-DD``, inclusive)."""
    with Storage(db_path, create=False) as storage:
        return storage.count_reports(name, since=since, until=until)


def report_days(
    db_path: str | os.PathLike[str],
    name: str,
    *,
    since: str | None = None,
    until: str | None = None,
) -> list[tuple[str, int]]:
    """``(day, stored reports)`` for each UTC day with reports, in order."""
    with Storage(db_path, create=False) as storage:
        return storage.report_days(name, since=since, until=until)


def iter_report_chunks(
    db_path: str | os.PathLike[str],
    name: str,
    *,
    chunk_size: int = 50_000,
    since: str | None = None,
    until: str | None = None,
) -> Iterator[Reports]:
    """The campaign's stored reports, decoded with ``mechanism.from_wire``, ``chunk_size`` at a
    time, in storage order (``since``/``until``: only those UTC days, inclusive). The database
    is opened when iteration starts and closed when it ends.
    """
    with Storage(db_path, create=False) as storage:
        yield from storage.iter_report_chunks(name, chunk_size=chunk_size, since=since, until=until)
