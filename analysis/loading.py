"""A stored campaign's estimate, loaded from one collector database: the library behind
``ldp-analyze estimate``, ``ldp-analyze report`` and the dashboard.

Reports are streamed from the database in chunks (``analysis.dataset.iter_report_chunks``) into
the mechanism's mergeable statistic, with a progress bar on stderr when it is a terminal and the
campaign is large. A campaign with fewer reports than its ``min_batch_size`` is refused
(:class:`~analysis.min_batch.InsufficientReports`). ``since``/``until`` keep the reports of those
UTC days (inclusive; the collector stores the day each report arrived). Several sources go
through :mod:`analysis.sharded` instead (docs/scale-out.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from analysis.dataset import (
    StoredCampaign,
    count_reports,
    iter_report_chunks,
    load_campaign,
    report_days,
)
from analysis.estimation import check_estimable, estimate
from analysis.min_batch import require_min_batch
from analysis.progress import progress
from client_sdk.mechanisms.base import Reports

__all__ = [
    "PROGRESS_MIN_REPORTS",
    "check_window",
    "database_days",
    "estimable_candidates",
    "load_estimate",
]

PROGRESS_MIN_REPORTS = 200_000
"""Campaigns smaller than this aggregate in well under a second: no progress bar."""


def check_window(since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """``--since``/``--until`` as UTC days (``ValueError`` naming the flag), in order."""
    from collector.export import check_day

    since, until = check_day(since, "--since"), check_day(until, "--until")
    if since is not None and until is not None and since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    return since, until


def estimable_candidates(campaign: StoredCampaign) -> list[str]:
    """The candidates to estimate against; ``ValueError`` for a campaign with no estimator.

    A mechanism that records strings (RAPPOR) is decoded against the campaign's domain, its
    candidate list; the others ignore it.
    """
    candidates = list(campaign.domain or ())
    try:
        check_estimable(campaign.mechanism, candidates)
    except ValueError as error:
        raise ValueError(f"campaign {campaign.name!r}: {error}") from None
    return candidates


def _progress_chunks(
    db: str,
    campaign: str,
    total: int,
    chunk_size: int,
    *,
    label: str,
    since: str | None = None,
    until: str | None = None,
    quiet: bool = False,
) -> Iterator[Reports]:
    """The campaign's report chunks, with a bar on stderr for long runs on a terminal
    (``analysis.progress``; none with ``quiet``)."""
    quiet = quiet or total < PROGRESS_MIN_REPORTS
    with progress(desc=label, total=total, unit="report", quiet=quiet) as bar:
        for chunk in iter_report_chunks(
            db, campaign, chunk_size=chunk_size, since=since, until=until
        ):
            yield chunk
            bar.update(len(chunk))


def load_estimate(
    db: str | os.PathLike[str],
    name: str,
    *,
    confidence: float,
    chunk_size: int = 50_000,
    since: str | None = None,
    until: str | None = None,
    quiet: bool = False,
) -> tuple[StoredCampaign, Any]:
    """The stored campaign and its raw estimate, streamed; refuses below ``min_batch_size``.

    ``since``/``until`` (``YYYY-MM-DD``, checked by :func:`check_window`): the reports of those
    UTC days only, inclusive. ``quiet``: no progress bar (``analysis.progress``).

    The count is checked before anything is streamed and again on the statistic actually read.
    Raises ``FileNotFoundError`` for a missing database, ``LookupError`` for an unknown
    campaign, :class:`~analysis.min_batch.InsufficientReports` (a ValueError) below the
    minimum and ``ValueError`` for a mechanism that cannot be estimated.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"--confidence must be in (0, 1); got {confidence!r}")
    path = os.fspath(db)
    campaign = load_campaign(path, name)
    mechanism = campaign.mechanism
    candidates = estimable_candidates(campaign)
    since, until = check_window(since, until)
    total = count_reports(path, name, since=since, until=until)
    require_min_batch(total, campaign.min_batch_size, name)
    chunks = _progress_chunks(
        path, name, total, chunk_size, label=name, since=since, until=until, quiet=quiet
    )
    result = estimate(mechanism, chunks, confidence=confidence, candidates=candidates)
    require_min_batch(result.n, campaign.min_batch_size, name)
    return campaign, result


def database_days(
    db: str,
    campaign: StoredCampaign,
    *,
    confidence: float,
    chunk_size: int,
    since: str | None = None,
    until: str | None = None,
) -> Iterator[tuple[str, int, Any]]:
    """``(day, n, estimate)`` of each UTC day of one database with reports in the window
    (``None`` for a day below ``min_batch_size``: its n only)."""
    candidates = estimable_candidates(campaign)
    for day, n in report_days(db, campaign.name, since=since, until=until):
        if n < campaign.min_batch_size:
            yield day, n, None
            continue
        chunks = iter_report_chunks(db, campaign.name, chunk_size=chunk_size, since=day, until=day)
        yield (
            day,
            n,
            estimate(campaign.mechanism, chunks, confidence=confidence, candidates=candidates),
        )
