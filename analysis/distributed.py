"""Aggregation on Dask (``dask.distributed``): ``--dask local[:WORKERS]`` or ``tcp://HOST:PORT``.

The plan of ``analysis.sources`` becomes one task per id-range partition: each task runs on a
worker, reads its own fragments (a SQLite index range, Parquet row groups) and returns the
partition's small statistic; statistics combine in the tree of ``sources.tree_reduce``,
``split_every`` at a time, as ``dask.delayed`` nodes. The scheduler only ever sees the fragment
descriptions going out and statistics coming back, never a report. A worker lost mid-job makes
Dask recompute its tasks elsewhere; tasks are pure functions of their fragments, so the result
is the same, and being the same tree as in one process it is identical bit for bit, float sums
included (docs/scale-out.md).

Workers must reach the sources at the same paths (a shared or replicated file system).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any

from analysis.sources import (
    DEFAULT_SPLIT_EVERY,
    MergedStatistic,
    Plan,
    aggregate_partition,
    finish,
    merge_results,
    tree_reduce,
)

_LOCAL = re.compile(r"local(?::(\d+))?")


def parse_address(spec: str) -> tuple[str, int | None]:
    """``("local", workers)`` for ``local[:N]``, ``("remote", None)`` for a scheduler address."""
    match = _LOCAL.fullmatch(spec)
    if match:
        workers = int(match.group(1)) if match.group(1) else None
        if workers is not None and workers < 1:
            raise ValueError(f"--dask local:N needs N >= 1; got {spec!r}")
        return "local", workers
    if re.fullmatch(r"(tcp|tls|ucx|ws|wss)://[^\s/]+:\d+", spec):
        return "remote", None
    raise ValueError(f"--dask must be local, local:WORKERS or tcp://HOST:PORT; got {spec!r}")


@contextlib.contextmanager
def connect(spec: str, *, threads_per_worker: int = 1) -> Iterator[Any]:
    """A ``distributed.Client``: on a new ``LocalCluster`` (worker processes) or a scheduler."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as error:  # pragma: no cover - the test extra installs it
        raise RuntimeError(
            "--dask needs dask.distributed: pip install 'ldp-telemetry[scale]'"
        ) from error
    kind, workers = parse_address(spec)
    if kind == "remote":
        with Client(spec) as client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            dashboard_address=":0",  # a free port: several clusters may run at once
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def aggregate_distributed(
    client: Any,
    work: Plan,
    *,
    split_every: int = DEFAULT_SPLIT_EVERY,
    progress: bool = False,
) -> MergedStatistic:
    """Run the plan's partition tasks on the client's workers and merge them in a tree."""
    import dask

    # pure=False: a fragment names an id range, not its content, which may have grown since an
    # earlier job on a long-lived cluster; fresh keys never reuse a stale result.
    partition = dask.delayed(aggregate_partition, pure=False)
    combine = dask.delayed(merge_results, pure=False)
    config_json = work.config_json
    nodes = [partition(config_json, fragments) for fragments in work.tasks]
    root = tree_reduce(nodes, split_every, combine)
    future = client.compute(root)
    if progress:
        from distributed import progress as show_progress

        # Dask's text bar writes to stdout, which carries the estimate: send it to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            show_progress(future)
            sys.stderr.write("\n")
    return finish(work, future.result())
