"""Aggregation on Dask (``dask.distributed``): ``--dask local[:WORKERS]`` or ``tcp://HOST:PORT``.

The plan of ``analysis.sources`` becomes one task per id-range partition: each task runs on a
worker, reads its own fragments (a SQLite index range, Parquet row groups) and returns the
partition's small statistic; statistics combine in the tree of ``sources.tree_reduce``,
``split_every`` at a time, as ``dask.delayed`` nodes. The scheduler only ever sees the fragment
descriptions going out and statistics coming back, never a report. A worker lost mid-job makes
Dask recompute its tasks elsewhere; tasks are pure functions of their fragments, so the result
is the same, and being the same tree as in one process it is identical bit for bit, float sums
included (docs/scale-out.md). PEM's discovery adds one job per level
(:func:`support_distributed`): the candidate prefixes go out once per level, each partition's
support counts come back.

Workers must reach the sources at the same paths (a shared or replicated file system).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from analysis.sources import (
    DEFAULT_SPLIT_EVERY,
    Counts,
    MergedStatistic,
    Plan,
    add_counts,
    aggregate_partition,
    finish,
    merge_results,
    support_partition,
    tree_reduce,
)

__all__ = [
    "DaskEngine",
    "aggregate_distributed",
    "connect",
    "parse_address",
    "support_distributed",
]

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
    by_day: bool = False,
) -> MergedStatistic:
    """Run the plan's partition tasks on the client's workers and merge them in a tree
    (``by_day``: each day's statistic as well, :attr:`~analysis.sources.MergedStatistic.days`)."""
    import dask

    # pure=False: a fragment names an id range, not its content, which may have grown since an
    # earlier job on a long-lived cluster; fresh keys never reuse a stale result.
    partition = dask.delayed(functools.partial(aggregate_partition, by_day=by_day), pure=False)
    combine = dask.delayed(merge_results, pure=False)
    config_json = work.config_json
    nodes = [partition(config_json, fragments) for fragments in work.tasks]
    root = tree_reduce(nodes, split_every, combine)
    return finish(work, _compute(client, root, progress))


def support_distributed(
    client: Any,
    work: Plan,
    level: int,
    prefixes: npt.NDArray[np.int64],
    *,
    split_every: int = DEFAULT_SPLIT_EVERY,
    progress: bool = False,
    day: str | None = None,
) -> Counts:
    """PEM support counts of ``prefixes`` at ``level``: one task per partition on the workers
    (each re-reads its fragments and de-duplicates them), added in the same tree as in one
    process. The prefixes are one node of the graph, shipped to each worker once. ``day``: of
    the reports kept with that day (``analysis.sources.support_partition``)."""
    import dask

    task = dask.delayed(support_partition, pure=False)
    combine = dask.delayed(add_counts, pure=False)
    shared = dask.delayed(np.asarray(prefixes, dtype=np.int64), pure=False)
    config_json = work.config_json
    nodes = [task(config_json, fragments, level, shared, day) for fragments in work.tasks]
    return np.asarray(_compute(client, tree_reduce(nodes, split_every, combine), progress))


def _compute(client: Any, root: Any, progress: bool) -> Any:
    future = client.compute(root)
    if progress:
        from distributed import progress as show_progress

        # Dask's text bar writes to stdout, which carries the estimate: send it to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            show_progress(future)
            sys.stderr.write("\n")
    return future.result()


@dataclasses.dataclass(frozen=True)
class DaskEngine:
    """A plan's partition tasks on the workers of a ``distributed.Client`` (an
    ``analysis.sources.Engine``: the same results as ``LocalEngine``, bit for bit)."""

    client: Any
    split_every: int = DEFAULT_SPLIT_EVERY
    progress: bool = False

    def aggregate(self, work: Plan, *, by_day: bool = False) -> MergedStatistic:
        return aggregate_distributed(
            self.client, work, split_every=self.split_every, progress=self.progress, by_day=by_day
        )

    def support(
        self, work: Plan, level: int, prefixes: npt.NDArray[np.int64], *, day: str | None = None
    ) -> Counts:
        return support_distributed(
            self.client, work, level, prefixes, split_every=self.split_every, day=day
        )
