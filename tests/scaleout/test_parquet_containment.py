"""``--parquet`` reads only its own export: manifest paths contained in the folder, every file of
the manifest's campaign and config, the manifest and campaign document checked field by field.

Each attack is reproduced against ``ldp-analyze estimate --parquet`` and must be refused with a
message naming the file and the field, exit status 2 and no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import sources
from analysis.cli import main as analyze
from client_sdk.mechanisms import mechanism_from_config
from collector import export
from collector.storage import Storage
from tests.scaleout.shards import CONFIGS, campaign_document, fill, random_reports, report_ids

DAY = "2026-01-01"


def _export(root: Path, name: str, n: int, config: dict[str, Any], seed: int) -> Path:
    """``n`` seeded reports of campaign ``name`` stored on :data:`DAY` and exported."""
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(seed)
    rows = list(zip(report_ids(n, rng), random_reports(mechanism, n, rng), strict=True))
    db = root / f"{name}-{seed}.db"
    fill(db, campaign_document(name, config), rows, days=[DAY])
    out = root / "lake" / f"{name}-{seed}"
    export.export_campaign(db, name, out)
    return out


@pytest.fixture
def lake(tmp_path: Path) -> dict[str, Path]:
    """Campaign "small" (20 reports), campaign "big" (500, the same mechanism, so the same
    config_id) and campaign "small" of another config (epsilon 2), each exported."""
    return {
        "small": _export(tmp_path, "small", 20, CONFIGS["grr"], seed=1),
        "big": _export(tmp_path, "big", 500, CONFIGS["grr"], seed=2),
        "small-eps2": _export(tmp_path, "small", 40, {**CONFIGS["grr"], "epsilon": 2.0}, seed=3),
    }


def _manifest(directory: Path) -> dict[str, Any]:
    return dict(json.loads((directory / export.MANIFEST).read_text()))


def _write_manifest(directory: Path, document: Any) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    (directory / export.MANIFEST).write_text(text)


def _only_file(directory: Path) -> Path:
    (path,) = directory.glob("day=*/*.parquet")
    return path


def _estimate(
    directory: Path, capsys: pytest.CaptureFixture[str], name: str = "small"
) -> tuple[int, str, str]:
    code = analyze(["estimate", "--campaign", name, "--parquet", str(directory)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(
    directory: Path, capsys: pytest.CaptureFixture[str], *fragments: str
) -> tuple[int, str]:
    code, out, err = _estimate(directory, capsys)
    assert code == 2, (out, err)
    assert "Traceback" not in err and out == ""
    for fragment in fragments:
        assert fragment in err, err
    return code, err


def test_an_honest_export_is_estimated(lake: dict[str, Path], capsys: Any) -> None:
    code, out, err = _estimate(lake["small"], capsys)
    assert code == 0, err
    assert json.loads(out)["n"] == 20


def test_a_dotdot_path_to_another_campaign_is_refused(lake: dict[str, Path], capsys: Any) -> None:
    """The reported attack: small's manifest lists big's file through ``../``."""
    manifest = _manifest(lake["small"])
    big_file = _only_file(lake["big"]).relative_to(lake["big"].parent)
    manifest["files"] = [{"path": f"../{big_file.as_posix()}", "day": DAY, "rows": 500}]
    _write_manifest(lake["small"], manifest)
    _refused(lake["small"], capsys, str(lake["small"] / export.MANIFEST), "files[0].path", "'..'")


def test_an_absolute_path_is_refused(lake: dict[str, Path], capsys: Any) -> None:
    manifest = _manifest(lake["small"])
    manifest["files"].append({"path": str(_only_file(lake["big"])), "day": DAY, "rows": 500})
    _write_manifest(lake["small"], manifest)
    _refused(lake["small"], capsys, "files[1].path", "no absolute path")


@pytest.mark.parametrize("link", ["file", "day folder"])
def test_a_symlink_out_of_the_folder_is_refused(
    lake: dict[str, Path], capsys: Any, link: str
) -> None:
    manifest = _manifest(lake["small"])
    big_file = _only_file(lake["big"])
    if link == "file":
        name = f"day={DAY}/part-9999999999999999-9999999999999999.parquet"
        os.symlink(big_file, lake["small"] / name)
    else:
        os.symlink(big_file.parent, lake["small"] / "day=2026-01-02")
        name = f"day=2026-01-02/{big_file.name}"
    manifest["files"].append({"path": name, "rows": 500})
    _write_manifest(lake["small"], manifest)
    _refused(lake["small"], capsys, name, "outside the export directory")


@pytest.mark.parametrize(
    ("other", "field"), [("big", "ldp.campaign"), ("small-eps2", "ldp.config_id")]
)
def test_a_file_of_another_campaign_or_config_is_refused(
    lake: dict[str, Path], capsys: Any, other: str, field: str
) -> None:
    """A file copied in from another export, under a name and a row count that look right."""
    source = _only_file(lake[other])
    name = f"day={DAY}/part-9999999999999999-9999999999999999.parquet"
    shutil.copy(source, lake["small"] / name)
    manifest = _manifest(lake["small"])
    rows = {"big": 500, "small-eps2": 40}[other]
    manifest["files"].append({"path": name, "day": DAY, "rows": rows})
    _write_manifest(lake["small"], manifest)
    _refused(lake["small"], capsys, name, f"the file's {field}", "another campaign or config")


def test_a_file_whose_row_count_differs_from_the_manifest_is_refused(
    lake: dict[str, Path], capsys: Any
) -> None:
    manifest = _manifest(lake["small"])
    manifest["files"][0]["rows"] = 19
    _write_manifest(lake["small"], manifest)
    _refused(lake["small"], capsys, "holds 20 rows; the manifest says 19")


def test_a_manifest_of_another_campaign_is_refused(lake: dict[str, Path], capsys: Any) -> None:
    """The whole manifest (and its files) of big, beside small's campaign document."""
    shutil.copy(lake["big"] / export.MANIFEST, lake["small"] / export.MANIFEST)
    _refused(lake["small"], capsys, "lists files of campaign 'big'", "is campaign 'small'")


MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "not JSON": (lambda m: "{not json", "not a JSON document"),
    "a list": (lambda m: [m], "must be a JSON object; got list"),
    "no schema version": (
        lambda m: {k: v for k, v in m.items() if k != "schema_version"},
        "schema_version must be an integer; got None",
    ),
    "no files": (
        lambda m: {k: v for k, v in m.items() if k != "files"},
        "lacks the field(s) files",
    ),
    "an unknown field": (lambda m: {**m, "extra": 1}, "unknown field(s) extra"),
    "files not a list": (lambda m: {**m, "files": {"a": 1}}, "files must be a list; got dict"),
    "a file not an object": (lambda m: {**m, "files": ["x"]}, "files[0] must be a JSON object"),
    "a file without rows": (
        lambda m: {**m, "files": [{"path": m["files"][0]["path"]}]},
        "files[0] lacks the field(s) rows",
    ),
    "rows a string": (
        lambda m: {**m, "files": [{**m["files"][0], "rows": "20"}]},
        "files[0].rows must be a non-negative integer; got '20'",
    ),
    "rows negative": (
        lambda m: {**m, "files": [{**m["files"][0], "rows": -1}]},
        "files[0].rows must be a non-negative integer",
    ),
    "path a number": (
        lambda m: {**m, "files": [{**m["files"][0], "path": 7}]},
        "files[0].path must be a path day=YYYY-MM-DD/NAME.parquet",
    ),
    "a day that is not the path's": (
        lambda m: {**m, "files": [{**m["files"][0], "day": "2026-01-05"}]},
        "files[0].day '2026-01-05' is not the day of its path",
    ),
    "a file listed twice": (
        lambda m: {**m, "files": m["files"] * 2},
        "files[1].path",
    ),
    "campaign null": (lambda m: {**m, "campaign": None}, "campaign must be a non-empty string"),
    "a scan's upto a float": (
        lambda m: {**m, "scans": [{"since": None, "until": None, "upto": 1.5}]},
        "scans[0].upto must be a non-negative integer",
    ),
    "a scan's since not a day": (
        lambda m: {**m, "scans": [{"since": "yesterday", "until": None, "upto": 1}]},
        "scans[0].since must be a day YYYY-MM-DD",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_manifest_is_refused_naming_the_file_and_the_field(
    lake: dict[str, Path], capsys: Any, case: str
) -> None:
    change, message = MALFORMED[case]
    _write_manifest(lake["small"], change(_manifest(lake["small"])))
    _refused(lake["small"], capsys, str(lake["small"] / export.MANIFEST), message)


CAMPAIGN_MALFORMED: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "a list": (lambda d: [d], "must be a JSON object; got list"),
    "no mechanism": (
        lambda d: {k: v for k, v in d.items() if k != "mechanism"},
        "lacks the field mechanism",
    ),
    "min_batch_size a string": (
        lambda d: {**d, "min_batch_size": "1"},
        "min_batch_size must be int; got '1'",
    ),
    "domain a string": (lambda d: {**d, "domain": "v0"}, "domain must be list or null"),
}


@pytest.mark.parametrize("case", sorted(CAMPAIGN_MALFORMED))
def test_a_malformed_campaign_document_is_refused(
    lake: dict[str, Path], capsys: Any, case: str
) -> None:
    change, message = CAMPAIGN_MALFORMED[case]
    path = lake["small"] / export.CAMPAIGN_DOCUMENT
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    _refused(lake["small"], capsys, str(path), message)


def test_the_command_exits_2_without_a_traceback(lake: dict[str, Path]) -> None:
    """The real ``ldp-analyze`` process, on the ``../`` attack and on a manifest that is a list."""
    manifest = _manifest(lake["small"])
    manifest["files"][0]["path"] = "../big-2/" + manifest["files"][0]["path"]
    _write_manifest(lake["small"], manifest)
    command = [sys.executable, "-m", "analysis.cli", "estimate", "--campaign", "small"]
    for document in (manifest, [manifest]):
        _write_manifest(lake["small"], document)
        done = subprocess.run(
            [*command, "--parquet", str(lake["small"])],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert done.stderr.startswith("ldp-analyze estimate: error: ")
        assert str(lake["small"] / export.MANIFEST) in done.stderr


def test_a_shuffled_campaigns_export_is_read(tmp_path: Path) -> None:
    """Its config_id covers its "shuffle" block: recomputed with it, the export is accepted."""
    campaign = {
        "name": "s",
        "mechanism": {"mechanism": "grr", "k": 4},
        "domain": ["a", "b", "c", "d"],
        "shuffle": {"min_batch": 3, "central_epsilon": 1.0, "delta": 1e-6},
    }
    with Storage(tmp_path / "c.db") as storage:
        storage.create_campaign(campaign)
        rows = [(f"{i:032x}", str(i % 4)) for i in range(1, 4)]
        storage.insert_batch("s", "a" * 32, rows, size=3)
    export.export_campaign(tmp_path / "c.db", "s", tmp_path / "lake")
    stored, found = sources.open_sources("s", parquets=[str(tmp_path / "lake")])
    assert stored.shuffle == campaign["shuffle"]
    assert found[0].count("s") == 3
