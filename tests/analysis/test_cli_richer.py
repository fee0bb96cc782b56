"""`ldp-analyze estimate` on the richer-data campaigns: --range, --quantiles and their errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from tests.analysis.conftest import store_campaign

SW = {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0.0, "upper": 10.0, "bins": 16}
HIER = {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("richer") / "collector.db"
    rng = np.random.default_rng(1)
    store_campaign(path, {"name": "load", "mechanism": SW}, rng.uniform(2.0, 6.0, 3000))
    labels = [f"b{i}" for i in range(16)]
    store_campaign(
        path, {"name": "buckets", "mechanism": HIER, "domain": labels}, rng.integers(0, 8, 3000)
    )
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_quantiles_of_a_distribution(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--db", str(db), "--campaign", "load", "--quantiles", "0.5,0.9"]
    code, out, _ = _run(capsys, *argv, "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert [row["q"] for row in document["quantiles"]] == [0.5, 0.9]
    assert 3.0 < document["quantiles"][0]["value"] < 5.0
    assert document["quantiles"][0]["ci_low"] <= document["quantiles"][0]["value"]
    code, out, _ = _run(capsys, *argv, "--format", "table")
    assert code == 0
    quantile_rows = [line.split()[0] for line in out.splitlines() if re.match(r" +0\.\d+ ", line)]
    assert quantile_rows == ["0.5", "0.9"]  # only the asked quantiles, each once (not 0.99)


def test_range_of_a_hierarchical_campaign(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--db", str(db), "--campaign", "buckets", "--range", "0,8"]
    code, out, _ = _run(capsys, *argv, "--format", "json")
    assert code == 0
    answer = json.loads(out)["range"]
    assert abs(answer["frequency"] - 1.0) < 5 * answer["std_error"]
    code, out, err = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "buckets", "--range", "3,17"
    )
    assert code == 2 and "lo=3, hi=17" in err
    code, out, err = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "load", "--range", "0,1"
    )
    assert code == 2 and "--range does not apply" in err


def test_two_way_marginal_of_a_multi_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "multi.db"
    config = {
        "mechanism": "multi",
        "epsilon": 2.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 3}, {"name": "version", "k": 2}],
        "marginals": [["os", "version"]],
    }
    rng = np.random.default_rng(3)
    store_campaign(db, {"name": "devices", "mechanism": config}, rng.integers(0, 2, (2000, 2)))
    argv = ["estimate", "--db", str(db), "--campaign", "devices", "--marginal", "os,version"]
    code, out, _ = _run(capsys, *argv, "--format", "json")
    assert code == 0
    answer = json.loads(out)["marginal"]
    assert np.asarray(answer["frequencies"]).shape == (3, 2)
    code, out, _ = _run(capsys, *argv, "--format", "table")
    assert code == 0 and "marginal of os, version:" in out and "2,1" in out
    code, _, err = _run(capsys, *argv[:-1], "os,country", "--format", "json")
    assert code == 2 and "'country'" in err


def test_haar_ranges_and_key_value_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "richer.db"
    haar = {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16, "variant": "haar"}
    rng = np.random.default_rng(2)
    store_campaign(
        db,
        {"name": "haar", "mechanism": haar, "domain": [f"b{i}" for i in range(16)]},
        rng.integers(0, 8, 3000),
    )
    kv = {"mechanism": "pckv", "epsilon": 2.0, "k": 3, "padding": 2, "variant": "ue"}
    store_campaign(db, {"name": "kv", "mechanism": kv}, [{0: 0.5}, {1: -0.5, 2: 1.0}] * 1000)
    argv = ["estimate", "--db", str(db), "--campaign", "haar", "--range", "0,8"]
    code, out, _ = _run(capsys, *argv, "--quantiles", "0.5,0.9", "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["variant"].startswith("Haar wavelet")
    assert abs(document["range"]["frequency"] - 1.0) < 5 * document["range"]["std_error"]
    for row in document["quantiles"]:
        assert row["ci_low"] <= row["value"] <= row["ci_high"]
    code, out, _ = _run(capsys, *argv, "--format", "table")
    assert code == 0 and "Haar wavelet" in out and "\nrange [0, 8): " in out
    code, out, _ = _run(capsys, *argv, "--quantiles", "0.5", "--format", "table")
    line = next(line for line in out.splitlines() if line.startswith("quantiles: "))
    assert code == 0 and "p50 = " in line and "p90" not in line and "p99" not in line
    code, _, err = _run(capsys, *argv[:-1], "8,8")
    assert code == 2 and "lo=8, hi=8" in err
    code, out, _ = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "kv", "--format", "table"
    )
    head, rest = out.split("\n", 1)  # every estimate table opens with the same header line
    assert head == "campaign kv  n=2000  mechanism pckv (epsilon 2.0)  95% intervals"
    assert code == 0 and rest.startswith("n = 2000; PCKV-UE") and out.endswith("\n")
    code, out, _ = _run(capsys, "estimate", "--db", str(db), "--campaign", "kv", "--format", "json")
    keys = json.loads(out)["keys"]
    assert abs(keys[0]["mean"] - 0.5) < 5 * keys[0]["mean_std_error"]
    code, _, err = _run(
        capsys, "estimate", "--db", str(db), "--campaign", "kv", "--quantiles", "0.5"
    )
    assert code == 2 and "--quantiles does not apply" in err
