"""``ldp-analyze estimate`` and ``ldp-analyze gap`` over a real SQLite database made through
``collector.storage`` (the collector's own storage module, as the collector writes it).

The estimate is checked against ``analysis.estimate`` on the same reports (exact equality) and
against the known population (within z = 5.5 standard errors). Errors exit with status 2 and one
line on stderr naming the problem.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import estimate
from analysis.cli import main
from analysis.gap import utility_gap
from client_sdk import mechanism_from_config
from collector.storage import Storage
from tests.analysis.conftest import store_campaign
from tests.stats import assert_within_z

LABELS = ["home", "search", "settings", "profile", "help"]
GRR_CONFIG = {"mechanism": "grr", "epsilon": 2.0, "k": 5}
LAPLACE_CONFIG = {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 10.0}
TRUE_COUNTS = np.array([900, 500, 300, 200, 100])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "collector.db"
    values = np.repeat(np.arange(5), TRUE_COUNTS)
    store_campaign(path, {"name": "screens", "mechanism": GRR_CONFIG, "domain": LABELS}, values, 1)
    store_campaign(
        path,
        {"name": "tiny", "mechanism": GRR_CONFIG, "domain": LABELS, "min_batch_size": 100},
        values[:50],
        2,
    )
    store_campaign(path, {"name": "empty", "mechanism": GRR_CONFIG, "domain": LABELS}, [], 3)
    store_campaign(path, {"name": "load-time", "mechanism": LAPLACE_CONFIG}, np.full(400, 3.0), 4)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _reference(db: Path, name: str) -> Any:
    with Storage(db, create=False) as storage:
        mechanism = storage.get_campaign(name).mechanism
        return estimate(mechanism, list(storage.iter_report_chunks(name)))


def test_estimate_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "estimate", "--db", str(db), "--campaign", "screens")
    assert code == 0 and err == ""  # stderr is not a terminal: no progress bar
    document = json.loads(out)
    assert document["campaign"] == "screens"
    assert document["n"] == TRUE_COUNTS.sum()
    assert document["mechanism"] == GRR_CONFIG
    assert document["postprocessing"] == "base"
    assert [item["value"] for item in document["items"]] == LABELS
    reference = _reference(db, "screens")
    for v, item in enumerate(document["items"]):
        assert set(item) == {"value", "frequency", "std_error", "ci_low", "ci_high"}
        assert item["frequency"] == reference.frequencies[v]
        assert item["std_error"] == reference.std_errors[v]
        assert item["ci_low"] < item["frequency"] < item["ci_high"]
    frequencies = [item["frequency"] for item in document["items"]]
    std_errors = [item["std_error"] for item in document["items"]]
    assert_within_z(frequencies, TRUE_COUNTS / TRUE_COUNTS.sum(), std_errors)


def test_estimate_streams_in_small_chunks_to_the_same_result(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, whole, _ = _run(capsys, "estimate", "--db", str(db), "--campaign", "screens")
    _, chunked, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "screens", "--chunk-size", "7"
    )
    assert json.loads(whole) == json.loads(chunked)


def test_estimate_table_and_csv(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, "estimate", "--db", str(db), "--campaign", "screens")
    items = json.loads(out)["items"]
    code, table, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "screens", "--format", "table"
    )
    assert code == 0
    lines = table.splitlines()
    assert lines[0].startswith("campaign screens  n=2000  mechanism grr")
    assert lines[1].split() == ["value", "frequency", "std_error", "ci_low", "ci_high"]
    assert [line.split()[0] for line in lines[2:]] == LABELS
    assert float(lines[2].split()[1]) == pytest.approx(items[0]["frequency"], abs=1e-6)

    code, text, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "screens", "--format", "csv"
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["value"] for row in rows] == LABELS
    for row, item in zip(rows, items, strict=True):
        for column in ("frequency", "std_error", "ci_low", "ci_high"):
            assert float(row[column]) == item[column]


def test_estimate_postprocessed_and_top(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys,
        "estimate", "--db", str(db), "--campaign", "screens",
        "--postprocess", "norm-sub", "--replicates", "50",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    assert document["postprocessing"] == "norm-sub"
    assert sum(item["frequency"] for item in document["items"]) == pytest.approx(1.0)
    assert "theta" in document["postprocessing_details"]
    assert "bootstrap" in document["postprocessing_details"]["intervals"]

    code, out, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "screens", "--top", "3",
        "--postprocess", "mle", "--replicates", "30",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    assert document["top"] == 3 and document["postprocessing"] == "mle"
    assert [item["value"] for item in document["items"]] == ["home", "search", "settings"]
    assert all(item["significant"] for item in document["items"])
    assert document["bonferroni_z"] == pytest.approx(2.3263, abs=1e-4)  # z_{1 - 0.05/5}


def test_min_batch_size_is_enforced(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "estimate", "--db", str(db), "--campaign", "tiny")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "campaign 'tiny' has 50 reports, fewer than its min_batch_size 100" in err
    code, _, err = _run(capsys, "estimate", "--db", str(db), "--campaign", "empty")
    assert code == 2 and "has 0 reports" in err


def test_errors_exit_2_with_one_line(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "estimate", "--db", str(db), "--campaign", "nope")
    assert (
        code == 2
        and out == ""
        and err.strip() == ("ldp-analyze estimate: error: no campaign named 'nope'")
    )
    code, _, err = _run(capsys, "estimate", "--db", str(tmp_path / "missing.db"), "--campaign", "x")
    assert code == 2 and "no collector database at" in err and err.count("\n") == 1
    assert not (tmp_path / "missing.db").exists()  # never creates an empty database


def test_numeric_campaign_prints_the_mean(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "estimate", "--db", str(db), "--campaign", "load-time")
    assert code == 0
    document = json.loads(out)
    assert document["n"] == 400 and document["mechanism"]["mechanism"] == "laplace"
    assert_within_z(document["mean"], 3.0, document["std_error"])
    assert document["ci_low"] < document["mean"] < document["ci_high"]
    code, table, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "load-time", "--format", "table"
    )
    assert code == 0 and table.splitlines()[1].split()[:2] == ["coordinate", "mean"]
    code, _, err = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "load-time", "--postprocess", "mle"
    )
    assert code == 2 and "categorical campaigns only" in err


def test_gap_json(capsys: pytest.CaptureFixture[str]) -> None:
    config = {"mechanism": "oue", "epsilon": 1.0, "k": 100}
    code, out, _ = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "1000000", "--delta", "1e-6",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    expected = utility_gap(mechanism_from_config(config), 10**6, delta=1e-6).to_dict()
    for key in (
        "ldp_variance",
        "central_laplace_variance",
        "central_gaussian_variance",
        "variance_ratio",
        "shuffle_epsilon",
        "shuffle_epsilon_numerical",
        "ldp_users_for_central_laplace_error",
    ):
        assert document[key] == pytest.approx(expected[key], rel=1e-12)
    assert document["variance_ratio"] / 10**6 == pytest.approx(0.46, abs=0.005)
    assert document["shuffle_epsilon"] == pytest.approx(0.0235, abs=5e-4)

    code, out, _ = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "200",
        "--neighbouring", "add-remove", "--target-std", "0.001",
    )  # fmt: skip
    document = json.loads(out)
    assert document["shuffle_epsilon"] is None and document["shuffle_epsilon_reason"]
    assert document["users_needed"]["ldp_users"] == pytest.approx(3.68e6, rel=1e-3)
    code, table, _ = _run(
        capsys, "gap", "--mechanism", json.dumps(config), "--n", "1000", "--format", "table"
    )
    assert code == 0 and any(line.startswith("variance_ratio ") for line in table.splitlines())


def test_gap_from_a_campaign_and_its_errors(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "gap", "--db", str(db), "--campaign", "screens")
    assert code == 0
    document = json.loads(out)
    assert document["campaign"] == "screens" and document["n"] == 2000
    assert document["mechanism"] == GRR_CONFIG
    code, _, err = _run(capsys, "gap", "--mechanism", "{not json", "--n", "10")
    assert code == 2 and "--mechanism is not valid JSON" in err and err.count("\n") == 1
    code, _, err = _run(capsys, "gap", "--mechanism", '{"mechanism": "grr"}', "--n", "10")
    assert code == 2 and "epsilon" in err
    code, _, err = _run(
        capsys, "gap", "--mechanism", json.dumps(GRR_CONFIG), "--n", "10", "--db", str(db)
    )
    assert code == 2 and "not both" in err
    code, out, _ = _run(capsys, "gap", "--db", str(db), "--campaign", "load-time")
    assert code == 0  # a mean campaign: the curator's noisy sum (analysis.kinds.mean.gap)
    document = json.loads(out)
    assert document["kind"] == "mean" and document["n"] == 400
    assert document["central_laplace_variance"] == pytest.approx(2 * (10.0 / 1.0) ** 2 / 400**2)
    code, _, err = _run(
        capsys, "gap", "--db", str(db), "--campaign", "load-time", "--target-std", "0.01"
    )
    assert code == 2 and "--target-std applies to frequency oracles" in err
    code, _, err = _run(capsys, "gap", "--db", str(db), "--campaign", "nope")
    assert code == 2 and "no campaign named 'nope'" in err
