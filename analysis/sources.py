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

Time windows: ``since``/``until`` (UTC days, inclusive) keep the copies stored on those days; a
SQLite fragment filters on the stored day, a Parquet source reads only the files of those days
(the export is partitioned by day, so the other days' files are never opened). ``by_day``
splits each partition's statistic by the day of the copy kept, so each report counts once in
the whole series.

Discovery (PEM) chooses which prefixes to score from the previous level: each level is one
more job over the same partitions, each task counting its de-duplicated reports' support for
the broadcast candidates (:func:`support_partition`), the counts added in the same tree.

The API, for the CLI and the dashboard (stable): :func:`plan` cuts the work; an engine runs it,
:class:`LocalEngine` here or ``analysis.distributed.DaskEngine``, or the functions they wrap
(:func:`aggregate_local`, ``aggregate_distributed``); :func:`estimate_merged` turns a
:class:`MergedStatistic` into the campaign's estimate (the same as from one database)::

    work = plan("app-launches", ["shard-1.db", "shard-2.db"], ["lake/app-launches"])
    engine = LocalEngine()
    result = estimate_merged(engine, work, engine.aggregate(work), confidence=0.95)
"""

from __future__ import annotations

import dataclasses
import datetime
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
    "Engine",
    "LocalEngine",
    "MergedStatistic",
    "ParquetSource",
    "PartitionResult",
    "Plan",
    "SqliteSource",
    "aggregate_local",
    "aggregate_partition",
    "choose_bits",
    "estimate_merged",
    "needs_reports",
    "open_sources",
    "plan",
    "support_local",
    "support_partition",
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
Days = npt.NDArray[np.int64]
"""The day each copy was stored, as days since 1970-01-01 (``datetime64[D]`` as int64)."""
Counts = npt.NDArray[np.int64]


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

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports, Days]:
        """The ids (``(n, 2)`` uint64), decoded reports and stored days of this fragment."""


class Source(Protocol):
    """Where a campaign's reports are: a collector database or a Parquet export."""

    @property
    def label(self) -> str:
        """How the command line named it (``--db PATH``, ``--parquet DIR``)."""

    def campaign(self, name: str) -> StoredCampaign: ...

    def count(self, name: str, *, since: str | None = None, until: str | None = None) -> int:
        """Copies stored on the days ``since`` to ``until`` (inclusive; ``None``: open)."""

    def fragments(
        self, name: str, bits: int, *, since: str | None = None, until: str | None = None
    ) -> list[Fragment | None]:
        """One fragment per partition (``None``: nothing of the window there)."""


@dataclasses.dataclass(frozen=True)
class SqliteFragment:
    """One id range of a campaign in a collector database (the unique index seeks to it)."""

    path: str
    campaign: str
    low: str
    high: str | None
    since: str | None = None
    until: str | None = None

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports, Days]:
        windowed = self.since is not None or self.until is not None
        query = (
            "SELECT r.seq, r.report_id, r.payload, r.day FROM reports r"
            " JOIN campaigns c ON c.id = r.campaign_id"
            " WHERE c.name = ? AND r.report_id >= ?"
            + ("" if self.high is None else " AND r.report_id < ?")
            + (" AND r.day >= ? AND r.day <= ?" if windowed else "")
            + " ORDER BY r.report_id"
        )
        parameters = [self.campaign, self.low] + ([] if self.high is None else [self.high])
        if windowed:
            parameters += [self.since or "0000-00-00", self.until or "9999-99-99"]
        keys: list[Keys] = []
        reports: list[Reports] = []
        days: list[Days] = []
        with Storage(self.path, create=False) as storage:
            cursor = storage.db.conn.execute(query, parameters)
            while rows := cursor.fetchmany(READ_CHUNK):
                keys.append(keys_from_bytes(export.ids_to_bytes([row[1] for row in rows])))
                days.append(day_numbers([row[3] for row in rows]))
                try:
                    reports.append(decode_rows(mechanism, self.campaign, rows))
                except ValueError as error:
                    raise ValueError(f"--db {self.path}: {error}") from error
        return _concatenate(keys, reports, days)


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

    def count(self, name: str, *, since: str | None = None, until: str | None = None) -> int:
        with Storage(self.path, create=False) as storage:
            return storage.count_reports(name, since=since, until=until)

    def fragments(
        self, name: str, bits: int, *, since: str | None = None, until: str | None = None
    ) -> list[Fragment | None]:
        return [
            SqliteFragment(self.path, name, *partition_bounds(p, bits), since=since, until=until)
            for p in range(1 << bits)
        ]


@dataclasses.dataclass(frozen=True)
class ParquetFragment:
    """The row groups of Parquet files that may hold ids of one partition (with each file's
    day: the export's hive partition)."""

    directory: str
    pieces: tuple[tuple[str, tuple[int, ...], str], ...]
    partition: int
    bits: int

    def read(self, mechanism: Mechanism) -> tuple[Keys, Reports, Days]:
        import pyarrow.parquet as pq

        keys: list[Keys] = []
        reports: list[Reports] = []
        days: list[Days] = []
        for relative, row_groups, day in self.pieces:
            where = f"--parquet {self.directory}: {relative}"
            path = export.contained(Path(self.directory), relative, where=where)
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
            days.append(np.full(int(np.count_nonzero(mine)), day_number(day), dtype=np.int64))
        return _concatenate(keys, reports, days)


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
        """The exported campaign ``name``: ``_campaign.json`` checked field by field, its
        ``config_id`` recomputed from its content, and the manifest naming the same campaign."""
        directory = Path(self.directory)
        path = directory / export.CAMPAIGN_DOCUMENT
        if not path.is_file():
            raise FileNotFoundError(
                f"--parquet {self.directory}: no {export.CAMPAIGN_DOCUMENT} "
                "(not an export directory: ldp-collector export --out DIR writes one)"
            )
        document = _campaign_document(export.read_json(directory, export.CAMPAIGN_DOCUMENT), path)
        if document["name"] != name:
            raise LookupError(
                f"--parquet {self.directory} holds campaign {document['name']!r}, not {name!r}"
            )
        content_id = campaign_config_id(
            mechanism=document["mechanism"],
            domain=document.get("domain"),
            policy=document.get("policy"),
            min_batch_size=document["min_batch_size"],
            shuffle=document.get("shuffle"),
        )
        if content_id != document["config_id"]:
            raise ValueError(
                f"{path}: config_id {document['config_id']} is not the id of its content "
                f"({content_id})"
            )
        manifest = self._manifest()
        if (manifest.campaign, manifest.config_id) != (name, content_id):
            raise ValueError(
                f"{directory / export.MANIFEST}: lists files of campaign {manifest.campaign!r} "
                f"(config_id {manifest.config_id}), but {export.CAMPAIGN_DOCUMENT} is campaign "
                f"{name!r} (config_id {content_id})"
            )
        return StoredCampaign(
            name=document["name"],
            mechanism=_mechanism(canonical_json(document["mechanism"])),
            config=document["mechanism"],
            domain=document.get("domain"),
            policy=document.get("policy"),
            config_id=document["config_id"],
            min_batch_size=int(document["min_batch_size"]),
            created=document.get("created") or "",
            shuffle=document.get("shuffle"),
        )

    def _files(self, since: str | None, until: str | None) -> list[dict[str, Any]]:
        """The manifest's files of the days in the window (the others are never opened)."""
        return [
            entry
            for entry in self._manifest().files
            if (since is None or _entry_day(entry) >= since)
            and (until is None or _entry_day(entry) <= until)
        ]

    def count(self, name: str, *, since: str | None = None, until: str | None = None) -> int:
        return sum(int(entry["rows"]) for entry in self._files(since, until))

    def fragments(
        self, name: str, bits: int, *, since: str | None = None, until: str | None = None
    ) -> list[Fragment | None]:
        import pyarrow.parquet as pq

        manifest = self._manifest()
        pieces: list[list[tuple[str, tuple[int, ...], str]]] = [[] for _ in range(1 << bits)]
        for entry in self._files(since, until):
            where = f"--parquet {self.directory}: {entry['path']}"
            path = export.contained(Path(self.directory), entry["path"], where=where)
            try:
                metadata = pq.read_metadata(path)
            except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
                raise ValueError(f"{where}: {error}") from None
            _check_file_metadata(metadata, manifest, int(entry["rows"]), where=where)
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
                pieces[p].append((entry["path"], tuple(groups), _entry_day(entry)))
        return [
            ParquetFragment(self.directory, tuple(items), p, bits) if items else None
            for p, items in enumerate(pieces)
        ]


_CAMPAIGN_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "mechanism": (dict,),
    "min_batch_size": (int,),
    "config_id": (str,),
}
_OPTIONAL_CAMPAIGN_FIELDS: dict[str, tuple[type, ...]] = {
    "domain": (list, type(None)),
    "policy": (dict, type(None)),
    "created": (str, type(None)),
    "shuffle": (dict, type(None)),
}


def _campaign_document(document: Any, path: Path) -> dict[str, Any]:
    """An export's ``_campaign.json``, its fields' types checked (``ValueError`` naming the file
    and the field); the content itself is checked by its ``config_id`` and the mechanism."""
    if not isinstance(document, dict):
        raise ValueError(f"{path}: must be a JSON object; got {type(document).__name__}")
    for field, kinds in (*_CAMPAIGN_FIELDS.items(), *_OPTIONAL_CAMPAIGN_FIELDS.items()):
        if field not in document:
            if field in _CAMPAIGN_FIELDS:
                raise ValueError(f"{path}: lacks the field {field}")
            continue
        value = document[field]
        if isinstance(value, bool) or not isinstance(value, kinds):
            expected = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise ValueError(f"{path}: {field} must be {expected}; got {value!r}")
    return document


def _check_file_metadata(
    metadata: Any, manifest: export.Manifest, rows: int, *, where: str
) -> None:
    """A listed Parquet file must be of the manifest's campaign and config (its schema metadata,
    written by the export) and hold the rows the manifest counts."""
    export.check_schema_version(metadata.metadata, where=where)
    recorded = metadata.metadata or {}
    for key, expected in (("campaign", manifest.campaign), ("config_id", manifest.config_id)):
        found = recorded.get(f"ldp.{key}".encode(), b"").decode("utf-8", "replace")
        if found != expected:
            raise ValueError(
                f"{where}: the file's ldp.{key} is {found!r}, not the manifest's {expected!r} "
                "(a file of another campaign or config)"
            )
    if metadata.num_rows != rows:
        raise ValueError(f"{where}: holds {metadata.num_rows} rows; the manifest says {rows}")


def _partition_of_id(raw: bytes, bits: int) -> int:
    return int.from_bytes(bytes(raw)[:8], "big") >> (64 - bits) if bits else 0


def _entry_day(entry: dict[str, Any]) -> str:
    """A manifest file's day: its ``day`` field, else its hive directory (``day=YYYY-MM-DD/``)."""
    if entry.get("day"):
        return str(entry["day"])
    for part in Path(entry["path"]).parts:
        if part.startswith("day="):
            return part[len("day=") :]
    raise ValueError(f"manifest file {entry['path']!r} names no day")


_EPOCH = datetime.date(1970, 1, 1)


def day_number(day: str) -> int:
    """Days since 1970-01-01 of a ``YYYY-MM-DD`` day."""
    return (datetime.date.fromisoformat(day) - _EPOCH).days


def day_numbers(days: Sequence[str]) -> Days:
    """:func:`day_number` of each day (vectorized)."""
    return np.asarray(days, dtype="datetime64[D]").astype(np.int64)


def day_name(number: int) -> str:
    """The ``YYYY-MM-DD`` of a :func:`day_number`."""
    return (_EPOCH + datetime.timedelta(days=int(number))).isoformat()


def _concatenate(
    keys: list[Keys], reports: list[Reports], days: list[Days]
) -> tuple[Keys, Reports, Days]:
    if not keys:
        return np.zeros((0, 2), dtype=np.uint64), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(keys), np.concatenate(reports), np.concatenate(days)


@functools.lru_cache(maxsize=64)
def _mechanism(config_json: str) -> Mechanism:
    return mechanism_from_config(json.loads(config_json), stored=True)  # as stored (no floor)


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


DayStatistics = tuple[tuple[str, AggregateStatistic], ...]
"""``(day, statistic)`` pairs in day order."""


@dataclasses.dataclass(frozen=True)
class PartitionResult:
    """A partition's statistic (or a merge of several), with how many copies were read, and
    (``by_day``) the statistic of each day."""

    statistic: AggregateStatistic
    read: int
    duplicates: int
    partitions: int = 1
    days: DayStatistics = ()


def kept_reports(mechanism: Mechanism, fragments: Sequence[Fragment]) -> tuple[Reports, Days, int]:
    """One partition's reports from every source, each report id once, in id order, with the
    day of the copy kept and the number of copies read.

    The first copy of an id wins (sources in the order given), so what is kept depends only on
    the sources, never on how the work was cut or scheduled.
    """
    parts = [fragment.read(mechanism) for fragment in fragments]
    parts = [part for part in parts if len(part[0])]
    if not parts:
        return _no_reports(mechanism), np.zeros(0, dtype=np.int64), 0
    keys = np.concatenate([k for k, _, _ in parts])
    reports = np.concatenate([r for _, r, _ in parts])
    days = np.concatenate([d for _, _, d in parts])
    order = np.lexsort((keys[:, 1], keys[:, 0]))  # stable: the earlier copy first
    ordered = keys[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    kept = order[first]
    return reports[kept], days[kept], len(order)


def _no_reports(mechanism: Mechanism) -> Reports:
    try:
        return mechanism.from_wire([])
    except ValueError:
        return np.zeros(0)


def _aggregate(mechanism: Mechanism, reports: Reports, chunk_size: int) -> AggregateStatistic:
    statistic = mechanism.empty_statistic()
    for start in range(0, len(reports), chunk_size):
        statistic = statistic + mechanism.aggregate(reports[start : start + chunk_size])
    return statistic


def aggregate_partition(
    config_json: str,
    fragments: Sequence[Fragment],
    chunk_size: int = READ_CHUNK,
    *,
    by_day: bool = False,
) -> PartitionResult:
    """Read one partition from every source, keep each report id once, aggregate.

    Kept reports (:func:`kept_reports`) are aggregated in id order, ``chunk_size`` at a time,
    so the statistic depends only on the set of reports. ``by_day``: also the statistic of
    each day (the day of the copy kept), in id order within the day.
    """
    mechanism = _mechanism(config_json)
    kept, days, read = kept_reports(mechanism, fragments)
    statistic = _aggregate(mechanism, kept, chunk_size)
    per_day: DayStatistics = ()
    if by_day and len(kept):
        per_day = tuple(
            (day_name(day), _aggregate(mechanism, kept[days == day], chunk_size))
            for day in np.unique(days)
        )
    return PartitionResult(statistic, read, read - len(kept), days=per_day)


def merge_results(*results: PartitionResult) -> PartitionResult:
    """Left fold of partition results (statistics add; partitions hold disjoint ids)."""
    statistic = results[0].statistic
    for result in results[1:]:
        statistic = statistic + result.statistic
    days: dict[str, AggregateStatistic] = {}
    for result in results:
        for day, day_statistic in result.days:
            days[day] = days[day] + day_statistic if day in days else day_statistic
    return PartitionResult(
        statistic,
        sum(r.read for r in results),
        sum(r.duplicates for r in results),
        sum(r.partitions for r in results),
        tuple(sorted(days.items())),
    )


def support_partition(
    config_json: str,
    fragments: Sequence[Fragment],
    level: int,
    prefixes: npt.NDArray[np.int64],
    day: str | None = None,
) -> Counts:
    """How many of one partition's reports (de-duplicated as :func:`aggregate_partition` does)
    at ``level`` support each prefix: ``PEM.support_counts`` (prefixes as the int64 chunk array
    of ``analysis.kinds.discovery.estimate.discover_pem_by_support``). ``day``: only the reports
    whose copy kept was stored that day (the reports of that day of a ``by_day`` aggregate)."""
    mechanism = _mechanism(config_json)
    kept, days, _ = kept_reports(mechanism, fragments)
    if day is not None:
        kept = kept[days == day_number(day)]
    return np.asarray(mechanism.support_counts(kept, level, prefixes), dtype=np.int64)  # type: ignore[attr-defined]


def add_counts(*counts: Counts) -> Counts:
    """The sum of partitions' support counts (a node of the tree)."""
    total = counts[0].copy()
    for more in counts[1:]:
        total += more
    return total


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
    """Copies stored over all sources (before de-duplication), in the window."""
    since: str | None = None
    until: str | None = None

    @property
    def config_json(self) -> str:
        return canonical_json(self.campaign.config)


def plan(
    name: str,
    dbs: Sequence[str] = (),
    parquets: Sequence[str] = (),
    *,
    partitions: int | None = None,
    since: str | None = None,
    until: str | None = None,
) -> Plan:
    """Open the sources, check they agree, and cut the work into id-range partitions.

    ``since``/``until`` (``YYYY-MM-DD``, inclusive): only the copies stored on those UTC days;
    ``ValueError`` naming ``--since``/``--until`` for a malformed or reversed window.
    """
    since, until = export.check_day(since, "--since"), export.check_day(until, "--until")
    if since is not None and until is not None and since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    campaign, sources = open_sources(name, dbs, parquets)
    total = sum(source.count(name, since=since, until=until) for source in sources)
    report_bytes = _report_bytes(campaign.mechanism)
    bits = choose_bits(total, report_bytes, partitions=partitions)
    per_source = [source.fragments(name, bits, since=since, until=until) for source in sources]
    tasks = tuple(
        tuple(f for f in (fragments[p] for fragments in per_source) if f is not None)
        for p in range(1 << bits)
    )
    return Plan(campaign, tuple(s.label for s in sources), bits, tasks, total, since, until)


def _report_bytes(mechanism: Mechanism) -> int:
    """Decoded bytes of one report (from an empty chunk's dtype and trailing shape)."""
    try:
        empty = mechanism.from_wire([])
    except ValueError:
        return 64
    return max(1, int(empty.dtype.itemsize * int(np.prod(empty.shape[1:], dtype=np.int64))))


@dataclasses.dataclass(frozen=True)
class MergedStatistic:
    """The de-duplicated statistic of a campaign over its sources, and what it cost.

    ``days`` (when aggregated ``by_day``): ``(day, statistic)`` in day order, each report in
    the day of the copy kept, so the days' ``n`` add up to ``statistic.n``.
    """

    campaign: StoredCampaign
    statistic: AggregateStatistic
    read: int
    duplicates: int
    partitions: int
    sources: tuple[str, ...]
    days: DayStatistics = ()


def finish(work: Plan, result: PartitionResult) -> MergedStatistic:
    return MergedStatistic(
        campaign=work.campaign,
        statistic=result.statistic,
        read=result.read,
        duplicates=result.duplicates,
        partitions=result.partitions,
        sources=work.sources,
        days=result.days,
    )


def aggregate_local(
    work: Plan,
    *,
    split_every: int = DEFAULT_SPLIT_EVERY,
    progress: bool = False,
    by_day: bool = False,
) -> MergedStatistic:
    """Every partition in this process, one after another (memory: one partition).

    ``progress`` shows a bar over the partitions on stderr; ``by_day`` also splits the
    statistic by day (:attr:`MergedStatistic.days`).
    """
    from tqdm import tqdm

    tasks = tqdm(
        work.tasks, unit="partition", desc=work.campaign.name, file=sys.stderr, disable=not progress
    )
    results = [aggregate_partition(work.config_json, f, by_day=by_day) for f in tasks]
    return finish(work, tree_reduce(results, split_every, merge_results))


def support_local(
    work: Plan,
    level: int,
    prefixes: npt.NDArray[np.int64],
    *,
    split_every: int = DEFAULT_SPLIT_EVERY,
    day: str | None = None,
) -> Counts:
    """PEM support counts of ``prefixes`` at ``level`` over every partition, in this process
    (``day``: of that day's reports, as :func:`support_partition`)."""
    counts = [support_partition(work.config_json, f, level, prefixes, day) for f in work.tasks]
    return tree_reduce(counts, split_every, add_counts)


class Engine(Protocol):
    """Where a plan runs: :class:`LocalEngine` or ``analysis.distributed.DaskEngine``."""

    def aggregate(self, work: Plan, *, by_day: bool = False) -> MergedStatistic:
        """The plan's merged statistic (``by_day``: split by day as well)."""

    def support(
        self, work: Plan, level: int, prefixes: npt.NDArray[np.int64], *, day: str | None = None
    ) -> Counts:
        """PEM support counts of ``prefixes`` at ``level`` over the plan's partitions (``day``:
        of the reports kept with that day, :func:`support_partition`)."""


@dataclasses.dataclass(frozen=True)
class LocalEngine:
    """Every partition task in this process (:func:`aggregate_local`, :func:`support_local`)."""

    split_every: int = DEFAULT_SPLIT_EVERY
    progress: bool = False

    def aggregate(self, work: Plan, *, by_day: bool = False) -> MergedStatistic:
        return aggregate_local(
            work, split_every=self.split_every, progress=self.progress, by_day=by_day
        )

    def support(
        self, work: Plan, level: int, prefixes: npt.NDArray[np.int64], *, day: str | None = None
    ) -> Counts:
        return support_local(work, level, prefixes, split_every=self.split_every, day=day)


def needs_reports(mechanism: Mechanism) -> bool:
    """Whether the estimate reads the reports again beyond the merged statistic: PEM, whose
    decoder chooses each level's candidates from the previous level (one more job per level)."""
    return mechanism.reads_reports


def estimate_merged(
    engine: Engine,
    work: Plan,
    merged: MergedStatistic,
    *,
    confidence: float = 0.95,
    candidates: Sequence[str] | None = None,
    day: str | None = None,
) -> Any:
    """The campaign's estimate from its merged statistic: ``analysis.estimation.estimate``, the
    same as over one database holding each report once. PEM (:func:`needs_reports`) runs
    ``analysis.kinds.discovery.estimate.discover_pem_by_support`` with one support job per level on
    ``engine``, its reports per level from ``merged``. ``candidates``: RAPPOR's and the
    sketches' (the campaign's domain); the others ignore them. ``day``: the estimate of that
    day of a ``by_day`` aggregate (``LookupError`` for a day without reports).
    """
    from analysis.estimation import estimate

    statistic = merged.statistic
    if day is not None:
        days = dict(merged.days)
        if day not in days:
            raise LookupError(f"no reports on {day} (aggregate with by_day=True)")
        statistic = days[day]
    mechanism = work.campaign.mechanism
    if needs_reports(mechanism):
        from analysis.kinds.discovery.estimate import discover_pem_by_support

        def support(level: int, prefixes: npt.NDArray[np.int64]) -> Counts:
            return engine.support(work, level, prefixes, day=day)

        return discover_pem_by_support(
            mechanism,  # type: ignore[arg-type]
            statistic.counts,
            support,
            confidence=confidence,
        )
    return estimate(mechanism, statistic, confidence=confidence, candidates=candidates)
