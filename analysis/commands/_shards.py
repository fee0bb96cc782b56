"""The options of ``ldp-analyze estimate`` over several sources: ``--db`` (repeated),
``--parquet``, ``--dask``, ``--partitions``, ``--split-every``, read into the library's
:class:`analysis.sharded.Sources` (docs/scale-out.md).

One ``--db`` alone keeps the streaming path of ``analysis.loading``.
"""

from __future__ import annotations

import argparse
import sys

from analysis.commands._arguments import add_parquet_argument, positive_int
from analysis.progress import progress_enabled
from analysis.sharded import Sources
from analysis.sources import DEFAULT_SPLIT_EVERY


def add_shard_arguments(parser: argparse.ArgumentParser) -> None:
    """--parquet (repeated), --dask, --partitions, --split-every."""
    add_parquet_argument(parser)
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
    return sources_of(args).merged


def sources_of(args: argparse.Namespace) -> Sources:
    """The command's sources, with progress and the merge's summary line on stderr."""
    return Sources(
        campaign=args.campaign,
        dbs=tuple(args.db or ()),
        parquet=tuple(args.parquet),
        dask=args.dask,
        partitions=args.partitions,
        split_every=args.split_every,
        since=args.since,
        until=args.until,
        progress=progress_enabled(getattr(args, "quiet", False)),
        summary=lambda line: print(line, file=sys.stderr),
    )
