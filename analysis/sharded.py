"""A campaign's estimate over several sources: collector databases, Parquet exports, on Dask or
in this process (docs/scale-out.md); the library behind ``ldp-analyze estimate --db ... --db``,
``--parquet`` and ``--dask``.

The sources go through ``analysis.sources`` (id-range partitions, exact de-duplication by report
id, a tree merge), in this process or on Dask (``analysis.distributed``), within the
``since``/``until`` window (Parquet files of other days are never opened); :func:`sharded_days`
gives one estimate per day in one pass, each report in the day of the copy kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from analysis.min_batch import require_min_batch
from analysis.sources import (
    DEFAULT_SPLIT_EVERY,
    Engine,
    LocalEngine,
    MergedStatistic,
    Plan,
    estimate_merged,
    plan,
)
from collector.storage import StoredCampaign

__all__ = ["Candidates", "Sources", "engine", "sharded_days", "sharded_estimate"]

Candidates = Callable[[StoredCampaign], list[str]]
"""The campaign's candidates (its domain), refusing a campaign that cannot be estimated."""


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where a campaign's reports are and how to merge them.

    ``dask``: ``local[:N]`` or ``tcp://HOST:PORT`` (``None``: this process); ``partitions``:
    report-id partitions (``None``: from the data); ``progress``: a progress display on stderr;
    ``summary``: called with one line saying what was merged (sources, copies read, duplicates).
    """

    campaign: str
    dbs: Sequence[str] = ()
    parquet: Sequence[str] = ()
    dask: str | None = None
    partitions: int | None = None
    split_every: int = DEFAULT_SPLIT_EVERY
    since: str | None = None
    until: str | None = None
    progress: bool = False
    summary: Callable[[str], None] | None = None

    @property
    def merged(self) -> bool:
        """Whether the sources need the merge: not exactly one database, any Parquet, or Dask."""
        return len(self.dbs) != 1 or bool(self.parquet) or self.dask is not None


def _plan(sources: Sources) -> Plan:
    return plan(
        sources.campaign,
        list(sources.dbs),
        list(sources.parquet),
        partitions=sources.partitions,
        since=sources.since,
        until=sources.until,
    )


@contextlib.contextmanager
def engine(sources: Sources) -> Iterator[Engine]:
    """This process, or ``sources.dask`` (a LocalCluster for the context's life, or a
    scheduler); with ``progress``, Dask's progress bar or one tick per partition here."""
    if sources.dask is None:
        yield LocalEngine(split_every=sources.split_every, progress=sources.progress)
        return
    from analysis.distributed import DaskEngine, connect, parse_address

    parse_address(sources.dask)  # a bad address fails before a cluster starts
    with connect(sources.dask) as client:
        yield DaskEngine(client, split_every=sources.split_every, progress=sources.progress)


def _summary(sources: Sources, merged: MergedStatistic, work: Plan) -> None:
    if sources.summary is None:
        return
    window = ""
    if work.since is not None or work.until is not None:
        window = f" from {work.since or 'the first day'} to {work.until or 'the last day'}"
    sources.summary(
        f"ldp-analyze estimate: {len(merged.sources)} source(s), {merged.read} stored copies"
        f"{window}, {merged.duplicates} duplicate(s) dropped, {merged.partitions} partitions"
        + (f" on {sources.dask}" if sources.dask else "")
    )


def _check_address(sources: Sources) -> None:
    if sources.dask is not None:
        from analysis.distributed import parse_address

        parse_address(sources.dask)  # a bad address fails before any source is opened


def sharded_estimate(
    sources: Sources, *, confidence: float, candidates: Candidates
) -> tuple[StoredCampaign, Any]:
    """The raw estimate over every source in the window, each report id once; refused below
    ``min_batch_size``. PEM's discovery runs one more job per level on the same engine
    (``analysis.sources.estimate_merged``)."""
    _check_address(sources)
    work = _plan(sources)
    campaign = work.campaign
    candidates(campaign)
    with engine(sources) as runner:
        merged = runner.aggregate(work)
        _summary(sources, merged, work)
        require_min_batch(merged.statistic.n, campaign.min_batch_size, campaign.name)
        result = estimate_merged(
            runner, work, merged, confidence=confidence, candidates=candidates(campaign)
        )
    return campaign, result


def sharded_days(
    sources: Sources, *, confidence: float, candidates: Candidates
) -> tuple[StoredCampaign, list[tuple[str, int, Any]]]:
    """``(day, n, estimate)`` for each day with reports in the window (``None`` below
    ``min_batch_size``).

    One pass splits each partition's statistic by the day of the copy kept, so a report stored
    twice (a retry that landed on another collector the next day) counts once, in one day, and
    the days' n add up to the window's. PEM's discovery reads the window again level by level
    for each day, keeping that day's reports.
    """
    _check_address(sources)
    work = _plan(sources)
    campaign = work.campaign
    domain = candidates(campaign)
    points: list[tuple[str, int, Any]] = []
    with engine(sources) as runner:
        merged = runner.aggregate(work, by_day=True)
        _summary(sources, merged, work)
        for day, statistic in merged.days:
            if statistic.n < campaign.min_batch_size:
                points.append((day, statistic.n, None))
                continue
            result = estimate_merged(
                runner, work, merged, confidence=confidence, candidates=domain, day=day
            )
            points.append((day, statistic.n, result))
    return campaign, points
