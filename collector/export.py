"""Export a campaign's stored reports to Parquet, partitioned by day (docs/scale-out.md).

    ldp-collector export --db collector.db --campaign app-launches --out lake/app-launches \\
        [--since 2026-01-01] [--until 2026-01-31]

Layout of an export directory (one campaign per directory)::

    DIR/_campaign.json                   the campaign document (config_id included)
    DIR/_manifest.json                   schema version, source, scan cursors, committed files
    DIR/day=YYYY-MM-DD/part-<first seq>-<last seq>.parquet

The schema (version :data:`SCHEMA_VERSION`) stores each report as the mechanism's *decoded*
report array (``parse_wire``), not its JSON payload, so a reader aggregates columns directly:

* ``report_id``: ``fixed_size_binary(16)``, the 128-bit id (big-endian bytes of the hex).
* the payload: ``payload`` for a plain report array, or ``payload.<field>`` for each field of a
  structured dtype (local hashing: ``payload.seed`` uint64, ``payload.y`` uint32). A report
  with a trailing shape (bit rows of unary encoding, RAPPOR's bits) is a
  ``fixed_size_list<item>[width]`` column; the numpy dtype is in the schema metadata
  (``ldp.report_dtype``), so the reader rebuilds exactly the array ``parse_wire`` returned.
* the day is the hive partition key (``day=...`` directory), so ``pyarrow.dataset`` with
  ``partitioning="hive"`` (and Spark, DuckDB) see a ``day`` column.
* schema metadata: ``ldp.schema_version``, ``ldp.campaign``, ``ldp.config_id``,
  ``ldp.report_dtype``, ``ldp.report_shape``.

Rows of each file are sorted by ``report_id`` and cut into row groups of
:data:`ROW_GROUP_SIZE`, so a reader of one id range (``analysis.sources``) reads only the row
groups whose id statistics overlap it.

Incremental and idempotent: the manifest records, per exported day range, the storage sequence
number up to which the range has been scanned; a later export scans only beyond it (a row of a
day already covered up to its seq is skipped), so exporting the same days twice adds nothing.
Each chunk's files are written under a temporary name and renamed, then the manifest is
replaced atomically: the manifest is the commit point, readers read only the files it lists, and
files left by an interrupted export (not in the manifest) are deleted by the next one.
Streaming: reports are read ``chunk_size`` at a time through keyset pagination on the storage
sequence number, so memory is bounded by a chunk, not by the campaign.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from client_sdk.mechanisms import Reports
from collector.storage import Storage, StoredCampaign, decode_rows

SCHEMA_VERSION = 1
"""Version of the Parquet schema and of the manifest; readers accept this and older ones."""

MANIFEST = "_manifest.json"
CAMPAIGN_DOCUMENT = "_campaign.json"
"""Beside the data; a leading ``_`` (like ``_manifest.json``) hides both from Parquet readers."""
ROW_GROUP_SIZE = 8_192
"""Rows per Parquet row group: small enough that an id-range reader skips most of a file."""
DEFAULT_CHUNK_SIZE = 500_000
"""Reports read from SQLite (and written per file and day) at a time."""

ID_BYTES = 16
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_FILE_NAME = re.compile(r"part-\d{16}-\d{16}\.parquet")
_LOW_DAY, _HIGH_DAY = "0000-00-00", "9999-99-99"


def _pa() -> Any:
    """pyarrow, imported on use: it is the optional ``scale`` extra."""
    try:
        import pyarrow
    except ImportError as error:  # pragma: no cover - the test extra installs it
        raise RuntimeError(
            "Parquet export needs pyarrow: pip install 'ldp-telemetry[scale]'"
        ) from error
    return pyarrow


# ---- the schema: numpy report arrays <-> Arrow columns ------------------------------------------


def ids_to_bytes(report_ids: Sequence[str]) -> npt.NDArray[np.void]:
    """32-hex report ids as an array of 16-byte values (``V16``), in the given order."""
    raw = bytes.fromhex("".join(report_ids))
    if len(raw) != ID_BYTES * len(report_ids):
        raise ValueError("report ids must be 32 hex characters each")
    return np.frombuffer(raw, dtype=f"V{ID_BYTES}")


def report_columns(reports: Reports) -> dict[str, Any]:
    """The payload columns (name -> Arrow array) of a decoded report array."""
    pa = _pa()
    array = np.asarray(reports)
    if array.dtype.names is None:
        return {"payload": _column(pa, array)}
    return {f"payload.{name}": _column(pa, array[name]) for name in array.dtype.names}


def _column(pa: Any, values: npt.NDArray[Any]) -> Any:
    if values.dtype.kind not in "biuf":
        raise ValueError(f"reports of dtype {values.dtype} have no Parquet column type")
    n = values.shape[0]
    if values.ndim == 1:
        return pa.array(values)
    width = int(np.prod(values.shape[1:]))
    flat = pa.array(np.ascontiguousarray(values).reshape(n * width))
    return pa.FixedSizeListArray.from_arrays(flat, width)


def schema_metadata(campaign: StoredCampaign, reports: Reports) -> dict[bytes, bytes]:
    """The file-level metadata of the schema: version, campaign, and the exact numpy dtype."""
    array = np.asarray(reports)
    return {
        b"ldp.schema_version": str(SCHEMA_VERSION).encode(),
        b"ldp.campaign": campaign.name.encode(),
        b"ldp.config_id": campaign.config_id.encode(),
        b"ldp.report_dtype": json.dumps(np.lib.format.dtype_to_descr(array.dtype)).encode(),
        b"ldp.report_shape": json.dumps(list(array.shape[1:])).encode(),
    }


def reports_from_table(table: Any, metadata: Mapping[bytes, bytes]) -> Reports:
    """Rebuild the decoded report array from a table of the schema (any version <= ours)."""
    check_schema_version(metadata, where="a Parquet file")
    descr = json.loads(metadata[b"ldp.report_dtype"])
    dtype = np.lib.format.descr_to_dtype(_tuples(descr))
    shape = tuple(json.loads(metadata[b"ldp.report_shape"]))
    n = table.num_rows
    if dtype.names is None:
        return _numpy(table.column("payload"), dtype, (n, *shape))
    out = np.empty((n, *shape), dtype=dtype)
    for name in dtype.names:
        field = dtype.fields[name][0]  # type: ignore[index]
        out[name] = _numpy(table.column(f"payload.{name}"), field.base, (n, *shape, *field.shape))
    return out


def _tuples(descr: Any) -> Any:
    """JSON turned the dtype description's tuples into lists; numpy wants them back."""
    if isinstance(descr, str):
        return descr
    fields: list[tuple[Any, ...]] = []
    for name, kind, *shape in descr:
        kind = _tuples(kind) if isinstance(kind, list) else kind
        fields.append((name, kind, tuple(shape[0])) if shape else (name, kind))
    return fields


def _numpy(column: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
    pa = _pa()
    chunked = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_fixed_size_list(chunked.type):
        chunked = chunked.flatten()
    values = chunked.to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=dtype).reshape(shape)


def ids_from_table(table: Any) -> npt.NDArray[np.void]:
    """The ``report_id`` column as 16-byte values (``V16``)."""
    column = table.column("report_id").combine_chunks()
    data = column.buffers()[1]
    raw = np.frombuffer(data, dtype=np.uint8)
    start = column.offset * ID_BYTES
    return raw[start : start + ID_BYTES * len(column)].copy().view(f"V{ID_BYTES}")


def check_schema_version(metadata: Mapping[bytes, bytes] | None, *, where: str) -> int:
    """The schema version recorded in ``metadata``; ``ValueError`` if missing or too new."""
    raw = (metadata or {}).get(b"ldp.schema_version")
    if raw is None:
        raise ValueError(f"{where} has no ldp.schema_version: not written by ldp-collector export")
    try:
        version = int(raw)
    except ValueError:
        raise ValueError(f"{where} has ldp.schema_version {raw!r}, not an integer") from None
    if not 1 <= version <= SCHEMA_VERSION:
        raise ValueError(
            f"{where} has schema version {version}; this code reads versions 1 to "
            f"{SCHEMA_VERSION} (upgrade ldp-telemetry)"
        )
    return version


def build_table(
    campaign: StoredCampaign, ids: npt.NDArray[np.void], reports: Reports
) -> tuple[Any, npt.NDArray[np.intp]]:
    """The Arrow table of reports with 16-byte ids (``V16``, :func:`ids_to_bytes`), rows sorted
    by id; also the sorting permutation."""
    pa = _pa()
    order = np.argsort(ids.view(f"S{ID_BYTES}"), kind="stable")
    sorted_reports = np.asarray(reports)[order]
    id_column = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(ID_BYTES), len(ids), [None, pa.py_buffer(ids[order].tobytes())]
    )
    columns = {"report_id": id_column, **report_columns(sorted_reports)}
    schema = pa.schema(
        [pa.field(name, column.type, nullable=False) for name, column in columns.items()],
        metadata=schema_metadata(campaign, sorted_reports),
    )
    return pa.Table.from_arrays(list(columns.values()), schema=schema), order


def write_table(pq: Any, table: Any, path: Path, *, compression: str = "zstd") -> None:
    """Write a table of the schema atomically (a hidden temporary file, then a rename)."""
    temporary = path.with_name("." + path.name + ".tmp")
    pq.write_table(
        table,
        temporary,
        row_group_size=ROW_GROUP_SIZE,
        compression=compression,
        write_statistics=["report_id"],
    )
    os.replace(temporary, path)


# ---- the manifest -------------------------------------------------------------------------------


@dataclasses.dataclass
class Manifest:
    """What an export directory holds: committed files and how far each day range was scanned."""

    campaign: str
    config_id: str
    source: str
    scans: list[dict[str, Any]]
    files: list[dict[str, Any]]
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def load(cls, directory: Path) -> Manifest | None:
        """The manifest of an export directory (``None`` if it has none), its shape checked
        (:meth:`from_document`); ``ValueError`` naming the file and the field otherwise."""
        path = directory / MANIFEST
        if not path.exists():
            return None
        return cls.from_document(read_json(directory, MANIFEST), where=str(path))

    @classmethod
    def from_document(cls, document: Any, *, where: str) -> Manifest:
        """A manifest from its JSON document, every field checked: the files' paths stay inside
        the export directory (``day=YYYY-MM-DD/NAME.parquet``; :func:`contained` also resolves
        symlinks when a file is opened). ``ValueError`` naming ``where`` and the field."""
        if not isinstance(document, dict):
            raise ValueError(f"{where}: must be a JSON object; got {_kind(document)}")
        version = document.get("schema_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"{where}: schema_version must be an integer; got {version!r}")
        check_schema_version({b"ldp.schema_version": str(version).encode()}, where=where)
        fields = {field.name for field in dataclasses.fields(cls)}
        _check_keys(document, fields, fields, where=where, name="the manifest")
        for key in ("campaign", "config_id", "source"):
            if not isinstance(document[key], str) or not document[key]:
                raise ValueError(
                    f"{where}: {key} must be a non-empty string; got {document[key]!r}"
                )
        for key in ("scans", "files"):
            if not isinstance(document[key], list):
                raise ValueError(f"{where}: {key} must be a list; got {_kind(document[key])}")
        for i, scan in enumerate(document["scans"]):
            field = f"scans[{i}]"
            _check_keys(
                scan,
                {"since", "until", "upto"},
                {"since", "until", "upto"},
                where=where,
                name=field,
            )
            check_day(scan["since"], f"{where}: {field}.since")
            check_day(scan["until"], f"{where}: {field}.until")
            _check_count(scan["upto"], f"{where}: {field}.upto")
        seen: set[str] = set()
        for i, entry in enumerate(document["files"]):
            field = f"files[{i}]"
            _check_keys(entry, {"path", "rows"}, {"path", "day", "rows"}, where=where, name=field)
            day = check_entry_path(entry["path"], f"{where}: {field}.path")
            if "day" in entry and entry["day"] != day:
                raise ValueError(
                    f"{where}: {field}.day {entry['day']!r} is not the day of its path "
                    f"{entry['path']!r}"
                )
            _check_count(entry["rows"], f"{where}: {field}.rows")
            if entry["path"] in seen:
                raise ValueError(f"{where}: {field}.path {entry['path']!r} is listed twice")
            seen.add(entry["path"])
        return cls(**document)

    def save(self, directory: Path) -> None:
        _atomic_write(directory / MANIFEST, json.dumps(self.to_json(), indent=1) + "\n")

    def scanned_upto(self, day: str) -> int:
        """Every stored report of ``day`` with a sequence number up to this is exported."""
        return max(
            (
                int(scan["upto"])
                for scan in self.scans
                if (scan["since"] or _LOW_DAY) <= day <= (scan["until"] or _HIGH_DAY)
            ),
            default=0,
        )

    def scan_start(self, since: str | None, until: str | None) -> int:
        """The lowest watermark over the days of [since, until]: where a new scan must start.

        The watermark is a step function of the day changing only at scan boundaries, so its
        minimum over the range is at the range's start or at a boundary inside it.
        """
        low, high = since or _LOW_DAY, until or _HIGH_DAY
        points = {low}
        for scan in self.scans:
            if scan["since"] and low <= scan["since"] <= high:
                points.add(scan["since"])
            if scan["until"]:
                after = _next_day(scan["until"])
                if low <= after <= high:
                    points.add(after)
        return min(self.scanned_upto(point) for point in points)

    def record_scan(self, since: str | None, until: str | None, upto: int) -> None:
        for scan in self.scans:
            if scan["since"] == since and scan["until"] == until:
                scan["upto"] = max(int(scan["upto"]), upto)
                return
        self.scans.append({"since": since, "until": until, "upto": upto})

    @property
    def rows(self) -> int:
        return sum(int(f["rows"]) for f in self.files)


_ENTRY_PATH = re.compile(r"day=(\d{4}-\d{2}-\d{2})/([^/\\]+\.parquet)")


def check_entry_path(path: Any, field: str) -> str:
    """The day of a manifest file's path, which must be ``day=YYYY-MM-DD/NAME.parquet``
    (relative, no ``..``: inside the export directory); ``ValueError`` naming ``field``."""
    match = _ENTRY_PATH.fullmatch(path) if isinstance(path, str) else None
    if match is None or match.group(2) in (".parquet", "..parquet"):
        raise ValueError(
            f"{field} must be a path day=YYYY-MM-DD/NAME.parquet inside the export directory "
            f"(no absolute path, no '..'); got {path!r}"
        )
    return str(check_day(match.group(1), field))


def contained(directory: Path, relative: str, *, where: str) -> Path:
    """``directory / relative``, refused (``ValueError``) when it resolves outside ``directory``
    (an absolute path, ``..``, or a symlink that leads out)."""
    path = directory / relative
    resolved, root = path.resolve(), directory.resolve()
    if not resolved.is_relative_to(root) or resolved == root:
        raise ValueError(
            f"{where}: {relative!r} resolves to {resolved}, outside the export directory {root}"
        )
    return path


def read_json(directory: Path, name: str) -> Any:
    """A JSON file of an export directory (``_manifest.json``, ``_campaign.json``), contained
    in it; ``ValueError`` naming the file when it is not JSON."""
    path = contained(directory, name, where=str(directory))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path}: not a JSON document ({error})") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check_keys(
    value: Any, required: set[str], allowed: set[str], *, where: str, name: str
) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {name} must be a JSON object; got {_kind(value)}")
    missing, unknown = sorted(required - set(value)), sorted(set(value) - allowed)
    if missing:
        raise ValueError(f"{where}: {name} lacks the field(s) {', '.join(missing)}")
    if unknown:
        raise ValueError(f"{where}: {name} has unknown field(s) {', '.join(unknown)}")


def _check_count(value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field} must be a non-negative integer; got {value!r}")


def _next_day(day: str) -> str:
    if day == _HIGH_DAY:
        return day
    return (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat()


def _atomic_write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def check_day(value: str | None, option: str) -> str | None:
    """A ``YYYY-MM-DD`` day (or ``None``); ``ValueError`` naming the option otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or _DAY.fullmatch(value) is None:
        raise ValueError(f"{option} must be a day YYYY-MM-DD; got {value!r}")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{option} must be a real day YYYY-MM-DD; got {value!r}") from None
    return value


# ---- the export ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What one export run did."""

    directory: str
    exported: int
    skipped: int
    files: int
    total_rows: int
    seconds: float


def _iter_rows(
    storage: Storage,
    campaign: str,
    *,
    after: int,
    since: str | None,
    until: str | None,
    chunk_size: int,
) -> Iterator[list[tuple[int, str, str, str]]]:
    """Stored rows ``(seq, report_id, payload, day)`` of the campaign, chunk by chunk.

    Keyset pagination on ``seq`` like ``Storage.iter_payload_chunks`` (one short query per
    chunk, memory O(chunk)), with the day as well and the optional day bounds.
    """
    conditions = ["r.campaign_id = c.id", "c.name = ?", "r.seq > ?"]
    tail: list[Any] = []
    if since is not None:
        conditions.append("r.day >= ?")
        tail.append(since)
    if until is not None:
        conditions.append("r.day <= ?")
        tail.append(until)
    query = (
        "SELECT r.seq, r.report_id, r.payload, r.day FROM reports r, campaigns c WHERE "
        + " AND ".join(conditions)
        + " ORDER BY r.seq LIMIT ?"
    )
    last = after
    while True:
        rows = storage.db.conn.execute(query, [campaign, last, *tail, chunk_size]).fetchall()
        if not rows:
            return
        yield rows
        last = int(rows[-1][0])


def export_campaign(
    db: str | os.PathLike[str],
    campaign: str,
    out: str | os.PathLike[str],
    *,
    since: str | None = None,
    until: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    compression: str = "zstd",
) -> ExportResult:
    """Export (incrementally) the campaign's reports of days [since, until] into ``out``.

    Raises ``FileNotFoundError`` for a missing database, ``LookupError`` for an unknown
    campaign, and ``ValueError`` when ``out`` holds another campaign, another config of it, or
    an export of another database.
    """
    since, until = check_day(since, "--since"), check_day(until, "--until")
    if since and until and since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer; got {chunk_size!r}")
    pq = _parquet()
    started = time.perf_counter()
    directory = Path(out)
    source = str(Path(db).resolve())
    with Storage(db, create=False) as storage:
        stored = storage.get_campaign(campaign)
        directory.mkdir(parents=True, exist_ok=True)
        manifest = _open_manifest(directory, stored, source)
        _remove_uncommitted(directory, manifest)
        start = manifest.scan_start(since, until)
        exported = skipped = files = 0
        for rows in _iter_rows(
            storage, campaign, after=start, since=since, until=until, chunk_size=chunk_size
        ):
            reports = decode_rows(stored.mechanism, campaign, rows)
            seqs = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            days = np.array([row[3] for row in rows])
            fresh = np.ones(len(rows), dtype=bool)
            for day in np.unique(days):
                mark = manifest.scanned_upto(str(day))
                if mark > start:  # rows of this day up to ``mark`` are already exported
                    fresh &= ~((days == day) & (seqs <= mark))
            skipped += int(np.count_nonzero(~fresh))
            for day in np.unique(days[fresh]):
                chosen = np.flatnonzero(fresh & (days == day))
                entry = _write_file(
                    pq,
                    directory,
                    stored,
                    str(day),
                    [rows[i][1] for i in chosen],
                    reports[chosen],
                    int(seqs[chosen[0]]),
                    int(seqs[chosen[-1]]),
                    compression,
                )
                manifest.files.append(entry)
                exported += len(chosen)
                files += 1
            manifest.record_scan(since, until, int(seqs[-1]))
            manifest.save(directory)
        manifest.save(directory)
    return ExportResult(
        directory=str(directory),
        exported=exported,
        skipped=skipped,
        files=files,
        total_rows=manifest.rows,
        seconds=time.perf_counter() - started,
    )


def _parquet() -> Any:
    _pa()
    import pyarrow.parquet

    return pyarrow.parquet


def _open_manifest(directory: Path, stored: StoredCampaign, source: str) -> Manifest:
    """The directory's manifest, created (with the campaign document) for a new export."""
    manifest = Manifest.load(directory)
    document_path = directory / CAMPAIGN_DOCUMENT
    if manifest is None:
        if any(directory.iterdir()):
            raise ValueError(
                f"{directory} is not empty and holds no {MANIFEST}: export into a new or an "
                "export directory"
            )
        _atomic_write(document_path, json.dumps(stored.document(), indent=2) + "\n")
        manifest = Manifest(
            campaign=stored.name, config_id=stored.config_id, source=source, scans=[], files=[]
        )
        manifest.save(directory)
        return manifest
    if manifest.campaign != stored.name or manifest.config_id != stored.config_id:
        raise ValueError(
            f"{directory} holds campaign {manifest.campaign!r} (config_id {manifest.config_id}); "
            f"the database has campaign {stored.name!r} with config_id {stored.config_id}"
        )
    if manifest.source != source:
        raise ValueError(
            f"{directory} holds an export of {manifest.source}, not of {source}: export each "
            "collector's database into its own directory (the estimate merges them)"
        )
    return manifest


def _remove_uncommitted(directory: Path, manifest: Manifest) -> None:
    """Delete files an interrupted export left behind (renamed, but not in the manifest)."""
    committed = {f["path"] for f in manifest.files}
    for path in [p for day in directory.glob("day=*") for p in day.iterdir()]:
        relative = path.relative_to(directory).as_posix()
        if relative not in committed and (
            path.name.endswith(".tmp") or _FILE_NAME.fullmatch(path.name) is not None
        ):
            path.unlink()


def _write_file(
    pq: Any,
    directory: Path,
    stored: StoredCampaign,
    day: str,
    report_ids: Sequence[str],
    reports: Reports,
    first_seq: int,
    last_seq: int,
    compression: str,
) -> dict[str, Any]:
    table, _ = build_table(stored, ids_to_bytes(report_ids), reports)
    relative = f"day={day}/part-{first_seq:016d}-{last_seq:016d}.parquet"
    path = directory / relative
    path.parent.mkdir(exist_ok=True)
    write_table(pq, table, path, compression=compression)
    return {"path": relative, "day": day, "rows": table.num_rows}
