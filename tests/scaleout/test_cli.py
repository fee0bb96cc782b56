"""``ldp-analyze estimate`` over several --db and --parquet sources, in-process and on Dask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.cli import main as analyze
from tests.scaleout.shards import CONFIGS, DUPLICATES, build_shards, campaign_document, fill


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = analyze(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_estimate_over_shards_equals_the_single_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dask_client: Any
) -> None:
    (a, b), (lake,), whole = build_shards(tmp_path, "oue")
    code, single, _ = run(["estimate", "--db", str(whole), "--campaign", "c"], capsys)
    assert code == 0
    shards = ["estimate", "--campaign", "c", "--db", a, "--db", b, "--parquet", lake]
    code, merged, err = run(shards, capsys)
    assert code == 0, err
    assert json.loads(merged) == json.loads(single)  # integer counts: the same estimate
    assert f"3 source(s), {600 + DUPLICATES} stored copies, {DUPLICATES} duplicate(s)" in err
    # On a running scheduler (tcp://HOST:PORT): the package's LocalCluster.
    address = dask_client.scheduler.address
    code, on_dask, err = run([*shards, "--dask", address, "--format", "csv"], capsys)
    assert code == 0, err
    code, single_csv, _ = run(
        ["estimate", "--db", str(whole), "--campaign", "c", "--format", "csv"], capsys
    )
    assert on_dask == single_csv
    assert f"on {address}" in err


def test_a_numeric_campaign_over_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (a, b), (lake,), whole = build_shards(tmp_path, "piecewise")
    _, single, _ = run(["estimate", "--db", str(whole), "--campaign", "c"], capsys)
    code, merged, err = run(
        ["estimate", "--campaign", "c", "--parquet", lake, "--db", b, "--db", a], capsys
    )
    assert code == 0, err
    one, other = json.loads(single), json.loads(merged)
    assert other["n"] == one["n"] == 600
    # Float sums in another order (docs/scale-out.md): equal to rounding.
    np.testing.assert_allclose(other["mean"], one["mean"], rtol=1e-12)
    np.testing.assert_allclose(other["std_error"], one["std_error"], rtol=1e-9)


def test_mismatched_campaigns_are_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [(f"{i:032x}", 1) for i in range(5)]
    fill(tmp_path / "a.db", campaign_document("c", CONFIGS["grr"]), rows)
    fill(tmp_path / "b.db", campaign_document("c", {**CONFIGS["grr"], "k": 6}), rows)
    argv = ["estimate", "--campaign", "c", "--db", str(tmp_path / "a.db")]
    code, _, err = run([*argv, "--db", str(tmp_path / "b.db")], capsys)
    assert code == 2
    assert "differs between sources" in err
    assert f"--db {tmp_path / 'a.db'} has config_id" in err
    assert f"--db {tmp_path / 'b.db'} has config_id" in err
    code, _, err = run([*argv, "--dask", "cluster"], capsys)
    assert code == 2 and "--dask must be local, local:WORKERS or tcp://HOST:PORT" in err
    code, _, err = run(["estimate", "--campaign", "c"], capsys)
    assert code == 2 and "give at least one source: --db PATH or --parquet DIR" in err


def test_dask_local_2_through_the_command_line_equals_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dask local:2`` starts its own LocalCluster of two worker processes; a PEM campaign
    (discovery: one job per level on the cluster) prints what one process prints from one
    database."""
    dbs, (lake,), whole = build_shards(tmp_path, "pem")
    code, single, err = run(["estimate", "--db", str(whole), "--campaign", "c"], capsys)
    assert code == 0, err
    argv = ["estimate", "--campaign", "c", "--db", dbs[0], "--db", dbs[1], "--parquet", lake]
    code, on_dask, err = run([*argv, "--dask", "local:2"], capsys)
    assert code == 0, err
    assert json.loads(on_dask) == json.loads(single)
    assert len(json.loads(single)["levels"]) == 16
    assert f"{DUPLICATES} duplicate(s) dropped" in err and "on local:2" in err
