"""Time windows over shards: ``--since``/``--until`` and ``--by day`` with several ``--db`` and
``--parquet`` sources, against a model of the copies and against one database holding each
report once (on the day of the copy kept)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import sources
from analysis.cli import main as analyze
from client_sdk.mechanisms import mechanism_from_config
from collector import export
from collector.storage import Storage
from tests.scaleout.shards import CONFIGS, campaign_document, random_reports, report_ids

D1, D2, D3, D4 = "2026-04-01", "2026-04-02", "2026-04-03", "2026-04-04"
MIN_BATCH = 40

Copy = tuple[int, str, Any, str]
"""(source index, report id, payload, day stored)."""


def store(path: Path, document: dict[str, Any], rows: list[tuple[str, Any, str]]) -> None:
    """A collector database holding these (id, payload, day) rows."""
    with Storage(path) as storage:
        storage.create_campaign(document)
        for day in sorted({d for _, _, d in rows}):
            storage.insert_reports(
                document["name"],
                [(i, json.dumps(p, separators=(",", ":"))) for i, p, d in rows if d == day],
                day=day,
            )


def kept(copies: list[Copy], since: str | None, until: str | None) -> list[tuple[str, Any, str]]:
    """The model: copies stored in the window, the first source's copy of each id wins."""
    best: dict[str, tuple[int, Any, str]] = {}
    for source, report_id, payload, day in copies:
        if (since and day < since) or (until and day > until):
            continue
        if report_id not in best or source < best[report_id][0]:
            best[report_id] = (source, payload, day)
    return [(i, payload, day) for i, (_, payload, day) in best.items()]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two databases and a Parquet export of a third over four days. Retries left copies on
    other collectors, some on a later day (a retry after UTC midnight), one with a different
    payload (the first source's copy wins)."""
    directory = tmp_path_factory.mktemp("windows")
    config = CONFIGS["oue"]
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(7)
    n = 700
    ids = report_ids(n, rng)
    payloads = random_reports(mechanism, n, rng)
    days = [D1, D2, D3, D4]
    day_of = [D1 if i < 250 else D2 if i < 450 else D3 if i < 680 else D4 for i in range(n)]
    copies: list[Copy] = []
    for i in range(n):  # each report stored once, spread over the three shards
        copies.append((i % 3, ids[i], payloads[i], day_of[i]))
    for i in range(0, n, 7):  # a retry on the next shard, the same day or the next
        later = days[min(days.index(day_of[i]) + (i // 7) % 2, 3)]
        copies.append(((i + 1) % 3, ids[i], payloads[i], later))
    other = random_reports(mechanism, 1, rng)[0]
    copies.append((2, ids[0], other, D2))  # a differing copy in the last source: never kept
    document = {**campaign_document("c", config), "min_batch_size": MIN_BATCH}
    paths = [directory / f"{s}.db" for s in "abc"]
    for source, path in enumerate(paths):
        store(path, document, [(i, p, d) for s, i, p, d in copies if s == source])
    lake = directory / "lake"
    export.export_campaign(paths[2], "c", lake, chunk_size=100)
    return {
        "directory": directory,
        "document": document,
        "mechanism": mechanism,
        "copies": copies,
        "dbs": [str(paths[0]), str(paths[1])],
        "parquets": [str(lake)],
    }


def reference(shards: dict[str, Any], name: str, since: str | None, until: str | None) -> Path:
    """One database holding each report of the window once, on the day of the copy kept."""
    path = shards["directory"] / f"{name}.db"
    if not path.exists():
        store(path, shards["document"], kept(shards["copies"], since, until))
    return path


WINDOWS = [(None, None), (D2, D3), (D2, None), (None, D1), (D4, D4)]


@pytest.mark.parametrize(("since", "until"), WINDOWS)
def test_a_window_over_shards_counts_each_report_of_the_window_once(
    shards: dict[str, Any], since: str | None, until: str | None
) -> None:
    mechanism = shards["mechanism"]
    work = sources.plan("c", shards["dbs"], shards["parquets"], since=since, until=until)
    merged = sources.aggregate_local(work, by_day=True)
    rows = kept(shards["copies"], since, until)
    assert merged.statistic == mechanism.aggregate(mechanism.from_wire([p for _, p, _ in rows]))
    window = [c for c in shards["copies"] if (not since or c[3] >= since)]
    window = [c for c in window if not until or c[3] <= until]
    assert work.total == merged.read == len(window)
    assert merged.duplicates == len(window) - len(rows)
    # by_day: each report in the day of its copy kept; the days add up to the window.
    expected_days = sorted({d for _, _, d in rows})
    assert [day for day, _ in merged.days] == expected_days
    for day, statistic in merged.days:
        payloads = [p for _, p, d in rows if d == day]
        assert statistic == mechanism.aggregate(mechanism.from_wire(payloads)), day
    assert sum(s.n for _, s in merged.days) == merged.statistic.n


def test_parquet_files_of_other_days_are_never_opened(shards: dict[str, Any]) -> None:
    """The export is partitioned by day: a window's plan lists only its days' files, so a
    damaged file of another day does not matter (and does when the window includes it)."""
    lake = Path(shards["parquets"][0])
    work = sources.plan("c", parquets=[str(lake)], since=D3, until=D3)
    read = {
        piece[0]
        for task in work.tasks
        for fragment in task
        for piece in getattr(fragment, "pieces", ())
    }
    assert read and all(path.startswith(f"day={D3}/") for path in read)
    damaged = lake.parent / "damaged-lake"
    shutil.copytree(lake, damaged)
    for path in damaged.glob(f"day={D1}/*.parquet"):
        path.write_bytes(b"not parquet")
    windowed = sources.aggregate_local(sources.plan("c", parquets=[str(damaged)], since=D2))
    assert (
        windowed.statistic
        == sources.aggregate_local(sources.plan("c", [], [str(lake)], since=D2)).statistic
    )
    with pytest.raises(ValueError, match=rf"--parquet {damaged}: day={D1}/part-.*magic bytes"):
        sources.plan("c", parquets=[str(damaged)], until=D1)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = analyze(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sharded(shards: dict[str, Any]) -> list[str]:
    argv = ["estimate", "--campaign", "c"]
    for db in shards["dbs"]:
        argv += ["--db", db]
    return [*argv, "--parquet", shards["parquets"][0]]


@pytest.mark.parametrize(("since", "until"), [(D2, D3), (None, D1)])
def test_the_window_on_the_command_line_equals_one_database(
    shards: dict[str, Any], capsys: pytest.CaptureFixture[str], since: str | None, until: str | None
) -> None:
    window = (["--since", since] if since else []) + (["--until", until] if until else [])
    one = reference(shards, f"ref-{since}-{until}", since, until)
    code, expected, err = run(["estimate", "--db", str(one), "--campaign", "c"], capsys)
    assert code == 0, err
    code, got, err = run([*sharded(shards), *window], capsys)
    assert code == 0, err
    assert json.loads(got) == json.loads(expected)
    assert f"from {since or 'the first day'} to {until or 'the last day'}" in err


def test_by_day_over_shards_equals_one_database_in_process_and_on_dask(
    shards: dict[str, Any], capsys: pytest.CaptureFixture[str], dask_client: Any
) -> None:
    one = reference(shards, "ref-all", None, None)
    code, expected, err = run(
        ["estimate", "--db", str(one), "--campaign", "c", "--by", "day"], capsys
    )
    assert code == 0, err
    series = json.loads(expected)
    # Not vacuous: four days, every one estimated but the last (below min_batch_size).
    assert [d["day"] for d in series["days"]] == [D1, D2, D3, D4]
    assert [d["estimate"] is None for d in series["days"]] == [False, False, False, True]
    assert 0 < series["days"][3]["n"] < MIN_BATCH
    code, got, err = run([*sharded(shards), "--by", "day"], capsys)
    assert code == 0, err
    assert json.loads(got) == series
    address = dask_client.scheduler.address
    code, got, err = run(
        [*sharded(shards), "--by", "day", "--format", "csv", "--dask", address], capsys
    )
    assert code == 0, err
    code, expected_csv, _ = run(
        ["estimate", "--db", str(one), "--campaign", "c", "--by", "day", "--format", "csv"], capsys
    )
    assert got == expected_csv
    # A window and a series together.
    part = reference(shards, "ref-d2-d4", D2, D4)
    code, expected, _ = run(
        ["estimate", "--db", str(part), "--campaign", "c", "--by", "day"], capsys
    )
    code, got, err = run([*sharded(shards), "--by", "day", "--since", D2, "--until", D4], capsys)
    assert code == 0, err
    got_series, expected_series = json.loads(got), json.loads(expected)
    assert got_series["since"] == D2 and got_series["until"] == D4
    assert got_series["days"] == expected_series["days"]


def test_bad_windows_over_shards_are_refused(
    shards: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([*sharded(shards), "--since", D3, "--until", D1], capsys)
    assert code == 2 and f"--since {D3} is after --until {D1}" in err
    code, _, err = run([*sharded(shards), "--until", "2026-4-1"], capsys)
    assert code == 2 and "--until must be a day YYYY-MM-DD; got '2026-4-1'" in err
