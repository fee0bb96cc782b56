"""``ldp-analyze estimate`` over several sources: ``--db`` (repeated), ``--parquet``, ``--dask``.

One ``--db`` alone keeps the streaming path of ``analysis.commands.estimate``. Several sources,
any ``--parquet`` export, or ``--dask`` go through ``analysis.sources`` (id-range partitions,
exact de-duplication by report id, a tree merge), in this process or on Dask
(``analysis.distributed``), with ``--since``/``--until`` (Parquet files of other days are never
opened) and ``--by day`` (one pass, each report in the day of the copy kept); docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from analysis.commands._arguments import positive_int
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

Candidates = Callable[[StoredCampaign], list[str]]
"""The campaign's candidates (its domain), refusing a campaign that cannot be estimated."""


def add_shard_arguments(parser: argparse.ArgumentParser) -> None:
    """--parquet (repeated), --dask, --partitions, --split-every."""
    parser.add_argument(
        "--parquet",
        action="append",
        default=[],
        metavar="DIR",
        help="a Parquet export (ldp-collector export); repeat for several, with or without --db",
    )
    parser.add_argument(
        "--dask",
        default=None,
        metavar="local[:N]|tcp://HOST:PORT",
        help="aggregate on Dask: a LocalCluster of N worker processes, or a running scheduler",
    )
    parser.add_argument(
        "--partitions",
        type=positive_int,
        default=None,
        metavar="N",
        help="report-id partitions (a power of two; default: from the data, ~128 MiB each)",
    )
    parser.add_argument(
        "--split-every",
        type=positive_int,
        default=DEFAULT_SPLIT_EVERY,
        metavar="N",
        help=f"partition statistics merged per tree node (default {DEFAULT_SPLIT_EVERY})",
    )


def uses_shards(args: argparse.Namespace) -> bool:
    """Whether the sources need the merge: not exactly one --db, any --parquet, or --dask."""
    return len(args.db or []) != 1 or bool(args.parquet) or args.dask is not None


def _plan(args: argparse.Namespace, **window: str | None) -> Plan:
    since, until = window.get("since", args.since), window.get("until", args.until)
    return plan(
        args.campaign,
        args.db or [],
        args.parquet,
        partitions=args.partitions,
        since=since,
        until=until,
    )


@contextlib.contextmanager
def engine(args: argparse.Namespace) -> Iterator[Engine]:
    """This process, or ``--dask`` (a LocalCluster for the command's life, or a scheduler).

    Progress goes to stderr when it is a terminal: Dask's progress bar, or one tick per
    partition in this process.
    """
    show = sys.stderr.isatty()
    if args.dask is None:
        yield LocalEngine(split_every=args.split_every, progress=show)
        return
    from analysis.distributed import DaskEngine, connect, parse_address

    parse_address(args.dask)  # a bad address fails before a cluster starts
    with connect(args.dask) as client:
        yield DaskEngine(client, split_every=args.split_every, progress=show)


def _summary(args: argparse.Namespace, merged: MergedStatistic, work: Plan) -> None:
    window = ""
    if work.since is not None or work.until is not None:
        window = f" from {work.since or 'the first day'} to {work.until or 'the last day'}"
    print(
        f"ldp-analyze estimate: {len(merged.sources)} source(s), {merged.read} stored copies"
        f"{window}, {merged.duplicates} duplicate(s) dropped, {merged.partitions} partitions"
        + (f" on {args.dask}" if args.dask else ""),
        file=sys.stderr,
    )


def _check_address(args: argparse.Namespace) -> None:
    if args.dask is not None:
        from analysis.distributed import parse_address

        parse_address(args.dask)  # a bad address fails before any source is opened


def merged_statistic(
    args: argparse.Namespace, *, check: Callable[[StoredCampaign], object] | None = None
) -> MergedStatistic:
    """The campaign's de-duplicated statistic over every source given (in the --since/--until
    window), in-process or on Dask. A summary line (sources, copies read, duplicates) goes to
    stderr. ``check`` vets the (agreed) campaign before any report is read.
    """
    _check_address(args)
    work = _plan(args)
    if check is not None:
        check(work.campaign)
    with engine(args) as runner:
        merged = runner.aggregate(work)
    _summary(args, merged, work)
    return merged


def sharded_estimate(
    args: argparse.Namespace, *, candidates: Candidates
) -> tuple[StoredCampaign, Any]:
    """The raw estimate over every --db and --parquet source in the window, each report id
    once, in this process or on --dask; refused below ``min_batch_size``. PEM's discovery runs
    one more job per level on the same engine (``analysis.sources.estimate_merged``)."""
    _check_address(args)
    work = _plan(args)
    campaign = work.campaign
    candidates(campaign)
    with engine(args) as runner:
        merged = runner.aggregate(work)
        _summary(args, merged, work)
        require_min_batch(merged.statistic.n, campaign.min_batch_size, campaign.name)
        result = estimate_merged(
            runner, work, merged, confidence=args.confidence, candidates=candidates(campaign)
        )
    return campaign, result


def sharded_days(
    args: argparse.Namespace, *, candidates: Candidates
) -> tuple[StoredCampaign, list[tuple[str, int, Any]]]:
    """``--by day`` over the sources: ``(day, n, estimate)`` for each day with reports in the
    window (``None`` below ``min_batch_size``).

    One pass splits each partition's statistic by the day of the copy kept, so a report stored
    twice (a retry that landed on another collector the next day) counts once, in one day, and
    the days' n add up to the window's. PEM's discovery reads the window again level by level
    for each day, keeping that day's reports.
    """
    _check_address(args)
    work = _plan(args)
    campaign = work.campaign
    domain = candidates(campaign)
    points: list[tuple[str, int, Any]] = []
    with engine(args) as runner:
        merged = runner.aggregate(work, by_day=True)
        _summary(args, merged, work)
        for day, statistic in merged.days:
            if statistic.n < campaign.min_batch_size:
                points.append((day, statistic.n, None))
                continue
            result = estimate_merged(
                runner, work, merged, confidence=args.confidence, candidates=domain, day=day
            )
            points.append((day, statistic.n, result))
    return campaign, points
