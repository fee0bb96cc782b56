"""Several shards of one campaign, merged into one statistic with exact de-duplication.

A campaign's reports may live in several collector databases (``--db``, one per collector
behind a load balancer) and in Parquet exports (``--parquet``, ``collector.export``). A client
whose retry landed on another collector left the same report (same 128-bit id) in two shards;
the merged statistic counts each report id once.

How (docs/scale-out.md): the 128-bit id space is cut into ``2**bits`` partitions by the id's
leading bits. Report ids are drawn by the SDK from the OS CSPRNG (``secrets.token_hex(16)``),
so the leading bits are already a uniform hash of the report and the partitions are balanced;
unlike a hash of the id, a prefix range is what SQLite's ``(campaign_id, report_id)`` index and
Parquet's per-row-group id statistics can seek to. Each partition is one task: it reads its id
range from every source (a SQLite index range; the Parquet row groups whose id statistics
overlap it), keeps the first copy of each id (sources in the order given), sorts the kept
reports by id and aggregates them. Partitions hold disjoint ids, so their statistics add with
no double counting, and one partition's ids and reports fit in memory by construction
(:func:`choose_bits`). Partition statistics combine in a tree (:func:`tree_reduce`, ``split_every``
at a time), the same tree in one process and on Dask (``analysis.distributed``), so the result
is bit-for-bit identical however it is computed, float sums included.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from client_sdk.config import canonical_json
from client_sdk.mechanisms import Mechanism, Reports, mechanism_from_config
from client_sdk.mechanisms.base import AggregateStatistic
from client_sdk.protocol import campaign_config_id
from collector import export
from collector.storage import Storage, StoredCampaign, decode_rows

__all__ = [
    "DEFAULT_SPLIT_EVERY",
    "MergedStatistic",
    "ParquetSource",
    "PartitionResult",
    "Plan",
    "SqliteSource",
    "aggregate_local",
    "aggregate_partition",
    "choose_bits",
    "open_sources",
    "plan",
    "tree_reduce",
]

PARTITION_BYTES = 128 * 1024 * 1024
"""Target decoded size of one partition (ids and reports): what a task holds in memory."""
MIN_PARTITIONS = 8
"""At least this many partitions, so a small cluster has work for every worker."""
MAX_BITS = 20
DEFAULT_SPLIT_EVERY = 8
"""Partition statistics merged per node of the combining tree."""
READ_CHUNK = 50_000
"""Rows read and decoded at a time from SQLite; reports aggregated at a time."""

Keys = npt.NDArray[np.uint64]
"""Report ids as an ``(n, 2)`` array of uint64: the high and low halves of the 128-bit id."""


# ---- partitions of the id space -----------------------------------------------------------------


def keys_from_bytes(raw: npt.NDArray[Any]) -> Keys:
    """16-byte big-endian ids (``V16``) as ``(n, 2)`` native uint64 (high, low)."""
    return (
        np.frombuffer(np.ascontiguousarray(raw).tobytes(), dtype=">u8")
        .astype(np.uint64)
        .reshape(-1, 2)
    )


def partition_of(keys: Keys, bits: int) -> npt.NDArray[np.int64]:
    """The partition of each id: its leading ``bits`` bits."""
    if bits == 0:
        return np.zeros(len(keys), dtype=np.int64)
    return (keys[:, 0] >> np.uint64(64 - bits)).astype(np.int64)


def partition_bounds(partition: int, bits: int) -> tuple[str, str | None]:
    """The partition's id range as 32-hex strings ``[low, high)`` (``None``: no upper end)."""
    shift = 128 - bits
    low = partition << shift
    high = (partition + 1) << shift
    return f"{low:032x}", (None if high >= 1 << 128 else f"{high:032x}")


def choose_bits(total_reports: int, report_bytes: int, *, partitions: int | None = None) -> int:
    """log2 of the number of partitions: enough that one holds about ``PARTITION_BYTES``.

    Depends only on the data (never on the cluster), so every engine cuts the same partitions.
    ``partitions`` (a power of two) overrides it.
    """
    if partitions is not None:
        if partitions < 1 or partitions & (partitions - 1) or partitions > 1 << MAX_BITS:
            raise ValueError(
                f"--partitions must be a power of two from 1 to {1 << MAX_BITS}; got {partitions}"
            )
        return partitions.bit_length() - 1
    needed = math.ceil(max(total_reports, 1) * (report_bytes + export.ID_BYTES) / PARTITION_BYTES)
    count = max(MIN_PARTITIONS, needed)
    return min(MAX_BITS, (count - 1).bit_length())


# ---- sources ------------------------------------------------------------------------------------


class Fragment(Protocol):
    """What one partition task reads from one source: picklable, small."""

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports]:
        """The ids (``(n, 2)`` uint64) and decoded reports of this fragment."""


class Source(Protocol):
    """Where a campaign's reports are: a collector database or a Parquet export."""

    @property
    def label(self) -> str:
        """How the command line named it (``--db PATH``, ``--parquet DIR``)."""

    def campaign(self, name: str) -> StoredCampaign: ...

    def count(self, name: str) -> int: ...

    def fragments(self, name: str, bits: int) -> list[Fragment | None]: ...


@dataclasses.dataclass(frozen=True)
class SqliteFragment:
    """One id range of a campaign in a collector database (the unique index seeks to it)."""

    path: str
    campaign: str
    low: str
    high: str | None

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports]:
        query = (
            "SELECT r.seq, r.report_id, r.payload FROM reports r"
            " JOIN campaigns c ON c.id = r.campaign_id"
            " WHERE c.name = ? AND r.report_id >= ?"
            + ("" if self.high is None else " AND r.report_id < ?")
            + " ORDER BY r.report_id"
        )
        parameters = [self.campaign, self.low] + ([] if self.high is None else [self.high])
        keys: list[Keys] = []
        reports: list[Reports] = []
        with Storage(self.path, create=False) as storage:
            cursor = storage.db.conn.execute(query, parameters)
            while rows := cursor.fetchmany(READ_CHUNK):
                keys.append(keys_from_bytes(export.ids_to_bytes([row[1] for row in rows])))
                try:
                    reports.append(decode_rows(mechanism, self.campaign, rows))
                except ValueError as error:
                    raise ValueError(f"--db {self.path}: {error}") from error
        return _concatenate(keys, reports)


@dataclasses.dataclass(frozen=True)
class SqliteSource:
    """A collector's SQLite database (``--db``), opened read-only in spirit (``create=False``)."""

    path: str

    @property
    def label(self) -> str:
        return f"--db {self.path}"

    def campaign(self, name: str) -> StoredCampaign:
        with Storage(self.path, create=False) as storage:
            return storage.get_campaign(name)

    def count(self, name: str) -> int:
        with Storage(self.path, create=False) as storage:
            return storage.count_reports(name)

    def fragments(self, name: str, bits: int) -> list[Fragment | None]:
        return [
            SqliteFragment(self.path, name, *partition_bounds(p, bits)) for p in range(1 << bits)
        ]


@dataclasses.dataclass(frozen=True)
class ParquetFragment:
    """The row groups of Parquet files that may hold ids of one partition."""

    directory: str
    pieces: tuple[tuple[str, tuple[int, ...]], ...]
    partition: int
    bits: int

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports]:
        import pyarrow.parquet as pq

        keys: list[Keys] = []
        reports: list[Reports] = []
        for relative, row_groups in self.pieces:
            path = Path(self.directory) / relative
            handle = pq.ParquetFile(path)
            table = handle.read_row_groups(list(row_groups))
            chunk_keys = keys_from_bytes(export.ids_from_table(table))
            mine = partition_of(chunk_keys, self.bits) == self.partition
            try:
                chunk = export.reports_from_table(table, handle.schema_arrow.metadata)
            except (ValueError, KeyError) as error:
                raise ValueError(f"--parquet {self.directory}: {relative}: {error}") from error
            keys.append(chunk_keys[mine])
            reports.append(chunk[mine])
        return _concatenate(keys, reports)


@dataclasses.dataclass(frozen=True)
class ParquetSource:
    """An export directory written by ``ldp-collector export`` (``--parquet``)."""

    directory: str

    @property
    def label(self) -> str:
        return f"--parquet {self.directory}"

    def _manifest(self) -> export.Manifest:
        manifest = export.Manifest.load(Path(self.directory))
        if manifest is None:
            raise FileNotFoundError(
                f"--parquet {self.directory}: no {export.MANIFEST} (not an export directory)"
            )
        return manifest

    def campaign(self, name: str) -> StoredCampaign:
        path = Path(self.directory) / export.CAMPAIGN_DOCUMENT
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("name") != name:
            raise LookupError(
                f"--parquet {self.directory} holds campaign {document.get('name')!r}, not {name!r}"
            )
        content_id = campaign_config_id(
            mechanism=document["mechanism"],
            domain=document.get("domain"),
            policy=document.get("policy"),
            min_batch_size=document["min_batch_size"],
        )
        if content_id != document.get("config_id"):
            raise ValueError(
                f"{path}: config_id {document.get('config_id')} is not the id of its content "
                f"({content_id})"
            )
        return StoredCampaign(
            name=document["name"],
            mechanism=_mechanism(canonical_json(document["mechanism"])),
            config=document["mechanism"],
            domain=document.get("domain"),
            policy=document.get("policy"),
            config_id=document["config_id"],
            min_batch_size=int(document["min_batch_size"]),
            created=document.get("created", ""),
        )

    def count(self, name: str) -> int:
        return self._manifest().rows

    def fragments(self, name: str, bits: int) -> list[Fragment | None]:
        import pyarrow.parquet as pq

        pieces: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(1 << bits)]
        for entry in self._manifest().files:
            metadata = pq.read_metadata(Path(self.directory) / entry["path"])
            export.check_schema_version(
                metadata.metadata, where=f"--parquet {self.directory}: {entry['path']}"
            )
            column = metadata.schema.names.index("report_id")
            spans: dict[int, list[int]] = {}
            for group in range(metadata.num_row_groups):
                statistics = metadata.row_group(group).column(column).statistics
                if statistics is not None and statistics.has_min_max:
                    first = _partition_of_id(statistics.min, bits)
                    last = _partition_of_id(statistics.max, bits)
                else:  # no statistics: the row group may hold any id
                    first, last = 0, (1 << bits) - 1
                for p in range(first, last + 1):
                    spans.setdefault(p, []).append(group)
            for p, groups in spans.items():
                pieces[p].append((entry["path"], tuple(groups)))
        return [
            ParquetFragment(self.directory, tuple(items), p, bits) if items else None
            for p, items in enumerate(pieces)
        ]


def _partition_of_id(raw: bytes, bits: int) -> int:
    return int.from_bytes(bytes(raw)[:8], "big") >> (64 - bits) if bits else 0


def _concatenate(keys: list[Keys], reports: list[Reports]) -> tuple[Keys, Reports]:
    if not keys:
        return np.zeros((0, 2), dtype=np.uint64), np.zeros(0)
    return np.concatenate(keys), np.concatenate(reports)


@functools.lru_cache(maxsize=64)
def _mechanism(config_json: str) -> Mechanism:
    return mechanism_from_config(json.loads(config_json))


def open_sources(
    name: str, dbs: Sequence[str] = (), parquets: Sequence[str] = ()
) -> tuple[StoredCampaign, list[Source]]:
    """The sources of campaign ``name`` and its (agreed) campaign.

    Every source must hold the campaign with the same ``config_id``; otherwise ``ValueError``
    naming both sources and both ids.
    """
    sources: list[Source] = [SqliteSource(os.fspath(p)) for p in dbs]
    sources += [ParquetSource(os.fspath(p)) for p in parquets]
    if not sources:
        raise ValueError("give at least one source: --db PATH or --parquet DIR")
    campaigns = [source.campaign(name) for source in sources]
    first = campaigns[0]
    for source, campaign in zip(sources[1:], campaigns[1:], strict=True):
        if campaign.config_id != first.config_id:
            raise ValueError(
                f"campaign {name!r} differs between sources: {sources[0].label} has config_id "
                f"{first.config_id}, {source.label} has config_id {campaign.config_id}"
            )
    return first, sources


# ---- the partition task and the tree -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PartitionResult:
    """A partition's statistic (or a merge of several), with how many copies were read."""

    statistic: AggregateStatistic
    read: int
    duplicates: int
    partitions: int = 1


def aggregate_partition(
    config_json: str, fragments: Sequence[Fragment], chunk_size: int = READ_CHUNK
) -> PartitionResult:
    """Read one partition from every source, keep each report id once, aggregate.

    The first copy of an id wins (sources in the order given); kept reports are aggregated in
    id order, ``chunk_size`` at a time, so the statistic depends only on the set of reports.
    """
    mechanism = _mechanism(config_json)
    parts = [fragment.read(mechanism) for fragment in fragments]
    parts = [(k, r) for k, r in parts if len(k)]
    statistic = mechanism.empty_statistic()
    if not parts:
        return PartitionResult(statistic, 0, 0)
    keys = np.concatenate([k for k, _ in parts])
    reports = np.concatenate([r for _, r in parts])
    order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: the earlier copy first
    ordered = keys[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    kept = reports[order[first]]
    for start in range(0, len(kept), chunk_size):
        statistic = statistic + mechanism.aggregate(kept[start : start + chunk_size])
    return PartitionResult(statistic, len(order), len(order) - len(kept))


def merge_results(*results: PartitionResult) -> PartitionResult:
    """Left fold of partition results (statistics add; partitions hold disjoint ids)."""
    statistic = results[0].statistic
    for result in results[1:]:
        statistic = statistic + result.statistic
    return PartitionResult(
        statistic,
        sum(r.read for r in results),
        sum(r.duplicates for r in results),
        sum(r.partitions for r in results),
    )


T = TypeVar("T")


def tree_reduce(items: Sequence[T], split_every: int, combine: Callable[..., T]) -> T:
    """Combine ``split_every`` items at a time, level by level, down to one.

    ``combine`` is :func:`merge_results` in one process and ``dask.delayed(merge_results)`` on
    Dask: the same tree, so float sums add in the same order on both.
    """
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2; got {split_every}")
    level = list(items)
    if not level:
        raise ValueError("nothing to combine")
    while len(level) > 1:
        level = [combine(*level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


@dataclasses.dataclass(frozen=True)
class Plan:
    """Which fragments each partition task reads, for one campaign over its sources."""

    campaign: StoredCampaign
    sources: tuple[str, ...]
    bits: int
    tasks: tuple[tuple[Fragment, ...], ...]
    total: int
    """Copies stored over all sources (before de-duplication)."""

    @property
    def config_json(self) -> str:
        return canonical_json(self.campaign.config)


def plan(
    name: str,
    dbs: Sequence[str] = (),
    parquets: Sequence[str] = (),
    *,
    partitions: int | None = None,
) -> Plan:
    """Open the sources, check they agree, and cut the work into id-range partitions."""
    campaign, sources = open_sources(name, dbs, parquets)
    total = sum(source.count(name) for source in sources)
    report_bytes = _report_bytes(campaign.mechanism)
    bits = choose_bits(total, report_bytes, partitions=partitions)
    per_source = [source.fragments(name, bits) for source in sources]
    tasks = tuple(
        tuple(f for f in (fragments[p] for fragments in per_source) if f is not None)
        for p in range(1 << bits)
    )
    return Plan(campaign, tuple(s.label for s in sources), bits, tasks, total)


def _report_bytes(mechanism: Mechanism) -> int:
    """Decoded bytes of one report (from an empty chunk's dtype and trailing shape)."""
    try:
        empty = mechanism.from_wire([])
    except ValueError:
        return 64
    return max(1, int(empty.dtype.itemsize * int(np.prod(empty.shape[1:], dtype=np.int64))))


@dataclasses.dataclass(frozen=True)
class MergedStatistic:
    """The de-duplicated statistic of a campaign over its sources, and what it cost."""

    campaign: StoredCampaign
    statistic: AggregateStatistic
    read: int
    duplicates: int
    partitions: int
    sources: tuple[str, ...]


def finish(work: Plan, result: PartitionResult) -> MergedStatistic:
    return MergedStatistic(
        campaign=work.campaign,
        statistic=result.statistic,
        read=result.read,
        duplicates=result.duplicates,
        partitions=result.partitions,
        sources=work.sources,
    )


def aggregate_local(
    work: Plan, *, split_every: int = DEFAULT_SPLIT_EVERY, progress: bool = False
) -> MergedStatistic:
    """Every partition in this process, one after another (memory: one partition).

    ``progress`` shows a bar over the partitions on stderr.
    """
    from tqdm import tqdm

    tasks = tqdm(
        work.tasks, unit="partition", desc=work.campaign.name, file=sys.stderr, disable=not progress
    )
    results = [aggregate_partition(work.config_json, fragments) for fragments in tasks]
    return finish(work, tree_reduce(results, split_every, merge_results))
