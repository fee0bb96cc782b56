"""``ldp-collector export``: Parquet by day, incremental, idempotent, and its schema read back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from analysis import sources
from analysis.dataset import iter_report_chunks
from analysis.estimation import aggregate
from client_sdk.mechanisms import mechanism_from_config
from collector import export
from collector.cli import main as collector_main
from collector.storage import Storage
from tests.scaleout.shards import CONFIGS, campaign_document, fill, random_reports, report_ids

DAYS = ["2026-03-01", "2026-03-02", "2026-03-03"]


def olh_db(path: Path, n: int = 900, seed: int = 0) -> list[tuple[str, object]]:
    rng = np.random.default_rng(seed)
    mechanism = mechanism_from_config(CONFIGS["olh"])
    rows = list(zip(report_ids(n, rng), random_reports(mechanism, n, rng), strict=True))
    fill(path, campaign_document("c", CONFIGS["olh"]), rows, days=DAYS)
    return rows


def exported_ids(directory: Path) -> list[str]:
    table = ds.dataset(directory, format="parquet", partitioning="hive").to_table()
    return [value.hex() for value in table.column("report_id").to_pylist()]


def test_export_is_partitioned_by_day_and_reads_back_as_the_stored_reports(tmp_path: Path) -> None:
    db, out = tmp_path / "c.db", tmp_path / "lake"
    rows = olh_db(db)
    result = export.export_campaign(db, "c", out, chunk_size=250)
    assert result.exported == len(rows) and result.total_rows == len(rows)
    assert sorted(p.name for p in out.glob("day=*")) == [f"day={d}" for d in DAYS]
    document = json.loads((out / "_campaign.json").read_text())
    with Storage(db, create=False) as storage:
        assert document == storage.get_campaign("c").document()
    # Any Parquet reader sees the day as a column (hive partitioning), the ids as 16 bytes and
    # the decoded OLH report as two integer columns: no JSON strings.
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(rows)
    assert set(table.column_names) == {"report_id", "payload.seed", "payload.y", "day"}
    assert table.schema.field("payload.seed").type == pa.uint64()
    assert table.schema.field("payload.y").type == pa.uint32()
    assert sorted(exported_ids(out)) == sorted(i for i, _ in rows)
    per_day = {d: 0 for d in DAYS}
    for day in table.column("day").to_pylist():
        per_day[str(day)] += 1
    assert per_day == {d: 300 for d in DAYS}
    # The Parquet statistic is exactly the database's.
    mechanism = mechanism_from_config(CONFIGS["olh"])
    work = sources.plan("c", parquets=[str(out)])
    assert sources.aggregate_local(work).statistic == aggregate(
        mechanism, iter_report_chunks(db, "c")
    )


def test_a_second_export_adds_nothing_and_a_later_one_adds_only_new_reports(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "c.db", tmp_path / "lake"
    rows = olh_db(db)
    export.export_campaign(db, "c", out, chunk_size=200)
    files = sorted(out.rglob("*.parquet"))
    again = export.export_campaign(db, "c", out, chunk_size=200)
    assert again.exported == 0 and again.files == 0
    assert sorted(out.rglob("*.parquet")) == files
    rng = np.random.default_rng(7)
    mechanism = mechanism_from_config(CONFIGS["olh"])
    late = list(zip(report_ids(50, rng), random_reports(mechanism, 50, rng), strict=True))
    with Storage(db) as storage:
        storage.insert_reports(
            "c", [(i, json.dumps(p)) for i, p in late], day=DAYS[0]
        )  # a late upload for a day already exported
    third = export.export_campaign(db, "c", out)
    assert third.exported == 50
    ids = exported_ids(out)
    assert len(ids) == len(set(ids)) == len(rows) + 50


def test_day_ranges_export_incrementally_without_overlap(tmp_path: Path) -> None:
    db, out = tmp_path / "c.db", tmp_path / "lake"
    rows = olh_db(db)
    first = export.export_campaign(db, "c", out, since=DAYS[1], until=DAYS[1])
    assert first.exported == 300
    assert [p.name for p in out.glob("day=*")] == [f"day={DAYS[1]}"]
    # The whole range afterwards adds the two other days, and the middle one not again.
    rest = export.export_campaign(db, "c", out, since=DAYS[0])
    assert rest.exported == 600 and rest.skipped == 300
    assert export.export_campaign(db, "c", out, until=DAYS[2]).exported == 0
    ids = exported_ids(out)
    assert sorted(ids) == sorted(i for i, _ in rows)


def test_files_of_an_interrupted_export_are_not_read_and_are_replaced(tmp_path: Path) -> None:
    db, out = tmp_path / "c.db", tmp_path / "lake"
    rows = olh_db(db)
    export.export_campaign(db, "c", out, until=DAYS[0])
    # A crash after a file was renamed but before the manifest was replaced leaves an orphan.
    orphan = out / f"day={DAYS[1]}" / "part-0000000000000301-0000000000000600.parquet"
    orphan.parent.mkdir()
    committed = next(out.rglob("*.parquet"))
    orphan.write_bytes(committed.read_bytes())
    work = sources.plan("c", parquets=[str(out)])
    assert sources.aggregate_local(work).statistic.n == 300  # readers follow the manifest
    export.export_campaign(db, "c", out)
    assert sorted(exported_ids(out)) == sorted(i for i, _ in rows)


def test_an_export_directory_holds_one_campaign_from_one_database(tmp_path: Path) -> None:
    db, other, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "lake"
    olh_db(db)
    olh_db(other, seed=1)
    export.export_campaign(db, "c", out)
    with pytest.raises(ValueError, match=r"export each collector's database into its own"):
        export.export_campaign(other, "c", out)
    with pytest.raises(ValueError, match=r"--since must be a day YYYY-MM-DD; got '2026-3-1'"):
        export.export_campaign(db, "c", tmp_path / "x", since="2026-3-1")
    with pytest.raises(LookupError, match="no campaign named 'nope'"):
        export.export_campaign(db, "nope", tmp_path / "y")


def test_every_report_dtype_round_trips_through_the_schema(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for name, config in CONFIGS.items():
        mechanism = mechanism_from_config(config)
        db, out = tmp_path / f"{name}.db", tmp_path / f"{name}-lake"
        rows = list(zip(report_ids(64, rng), random_reports(mechanism, 64, rng), strict=True))
        fill(db, campaign_document("c", config), rows)
        export.export_campaign(db, "c", out)
        (path,) = out.rglob("*.parquet")
        handle = pq.ParquetFile(path)
        table = handle.read()
        order = np.argsort([i for i, _ in rows])
        expected = mechanism.from_wire([rows[i][1] for i in order])
        got = export.reports_from_table(table, handle.schema_arrow.metadata)
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        assert np.array_equal(got, expected), name


def test_a_file_written_by_hand_to_schema_version_1_is_read_back(tmp_path: Path) -> None:
    """The documented schema, written without collector.export: what another writer of version
    1 (or an older release of this one) produces must keep reading."""
    config = CONFIGS["sue"]
    mechanism = mechanism_from_config(config)
    document = campaign_document("c", config)
    db = tmp_path / "c.db"
    fill(db, document, [])
    with Storage(db, create=False) as storage:
        stored = storage.get_campaign("c").document()
    rng = np.random.default_rng(5)
    reports = mechanism.perturb(rng.integers(0, 6, 40), rng=rng)  # uint8 bit rows (40, 1)
    ids = sorted(report_ids(40, rng))
    table = pa.table(
        {
            "report_id": pa.array([bytes.fromhex(i) for i in ids], pa.binary(16)),
            "payload": pa.FixedSizeListArray.from_arrays(pa.array(reports.reshape(-1)), 1),
        }
    ).replace_schema_metadata(
        {
            "ldp.schema_version": "1",
            "ldp.campaign": "c",
            "ldp.config_id": stored["config_id"],
            "ldp.report_dtype": '"|u1"',
            "ldp.report_shape": "[1]",
        }
    )
    out = tmp_path / "lake"
    (out / "day=2026-03-01").mkdir(parents=True)
    pq.write_table(table, out / "day=2026-03-01" / "part-1.parquet")
    (out / "_campaign.json").write_text(json.dumps(stored))
    manifest = {
        "schema_version": 1,
        "campaign": "c",
        "config_id": stored["config_id"],
        "source": "elsewhere",
        "scans": [],
        "files": [{"path": "day=2026-03-01/part-1.parquet", "day": "2026-03-01", "rows": 40}],
    }
    (out / "_manifest.json").write_text(json.dumps(manifest))
    merged = sources.aggregate_local(sources.plan("c", parquets=[str(out)]))
    assert merged.statistic == mechanism.aggregate(reports)
    # A newer schema is refused with the versions named.
    pq.write_table(
        table.replace_schema_metadata({**table.schema.metadata, b"ldp.schema_version": b"99"}),
        out / "day=2026-03-01" / "part-1.parquet",
    )
    with pytest.raises(ValueError, match="schema version 99; this code reads versions 1 to 1"):
        sources.plan("c", parquets=[str(out)])


def test_the_export_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, out = tmp_path / "c.db", tmp_path / "lake"
    olh_db(db)
    argv = ["export", "--db", str(db), "--campaign", "c", "--out", str(out)]
    assert collector_main([*argv, "--since", DAYS[2]]) == 0
    assert "exported 300 reports" in capsys.readouterr().out
    assert collector_main(argv) == 0
    assert "exported 600 reports" in capsys.readouterr().out
    assert collector_main([*argv, "--until", "2026-02-30"]) == 2
    assert "--until must be a real day YYYY-MM-DD; got '2026-02-30'" in capsys.readouterr().err
