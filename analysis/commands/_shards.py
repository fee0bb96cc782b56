"""``ldp-analyze estimate`` over several sources: ``--db`` (repeated), ``--parquet``, ``--dask``.

One ``--db`` alone keeps the streaming path of ``analysis.commands.estimate``. Several sources,
any ``--parquet`` export, or ``--dask`` go through ``analysis.sources`` (id-range partitions,
exact de-duplication by report id, a tree merge), in this process or on Dask
(``analysis.distributed``); docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from analysis.commands._arguments import positive_int
from analysis.sources import DEFAULT_SPLIT_EVERY, MergedStatistic, aggregate_local, plan
from collector.storage import StoredCampaign


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


def merged_statistic(
    args: argparse.Namespace, *, check: Callable[[StoredCampaign], object] | None = None
) -> MergedStatistic:
    """The campaign's de-duplicated statistic over every source given, in-process or on Dask.

    Progress goes to stderr when it is a terminal: Dask's progress bar, or one tick per
    partition in this process. A summary line (sources, copies read, duplicates) follows.
    ``check`` vets the (agreed) campaign before any report is read.
    """
    if args.dask is not None:
        from analysis.distributed import parse_address

        parse_address(args.dask)  # a bad address fails before any source is opened
    work = plan(args.campaign, args.db or [], args.parquet, partitions=args.partitions)
    if check is not None:
        check(work.campaign)
    show = sys.stderr.isatty()
    if args.dask is None:
        merged = aggregate_local(work, split_every=args.split_every, progress=show)
    else:
        from analysis.distributed import aggregate_distributed, connect

        with connect(args.dask) as client:
            merged = aggregate_distributed(
                client, work, split_every=args.split_every, progress=show
            )
    print(
        f"ldp-analyze estimate: {len(merged.sources)} source(s), {merged.read} stored copies, "
        f"{merged.duplicates} duplicate(s) dropped, {merged.partitions} partitions"
        + (f" on {args.dask}" if args.dask else ""),
        file=sys.stderr,
    )
    return merged
