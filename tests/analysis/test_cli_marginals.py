"""`ldp-analyze estimate --marginal` on CALM and Fourier campaigns: collected, reconstructed and
3-way marginals with bootstrap intervals, and the option's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from tests.analysis.conftest import store_campaign

CALM = {
    "mechanism": "multi",
    "epsilon": 2.0,
    "protocol": "smp",
    "attributes": [{"name": "os", "k": 3}, {"name": "version", "k": 2}, {"name": "tier", "k": 2}],
    "marginals": [["os", "version"], ["version", "tier"]],
}
FOURIER = {
    "mechanism": "fourier",
    "epsilon": 2.0,
    "attributes": [{"name": "wifi"}, {"name": "dark"}, {"name": "beta"}],
    "order": 3,
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("marginals") / "collector.db"
    rng = np.random.default_rng(4)
    x = np.stack([rng.integers(0, 3, 3000), rng.integers(0, 2, 3000), rng.integers(0, 2, 3000)], 1)
    store_campaign(path, {"name": "devices", "mechanism": CALM}, x)
    store_campaign(path, {"name": "flags", "mechanism": FOURIER}, rng.integers(0, 2, (3000, 3)))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse refuses a malformed option
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("campaign", "names", "shape", "method"),
    [
        ("devices", "os,version", (3, 2), "consistent"),
        ("devices", "os,tier", (3, 2), "max-entropy"),
        ("devices", "tier,os,version", (2, 3, 2), "max-entropy"),
        ("flags", "dark,wifi", (2, 2), "consistent"),
        ("flags", "wifi,dark,beta", (2, 2, 2), "consistent"),
    ],
)
def test_marginals_with_intervals(
    db: Path,
    capsys: pytest.CaptureFixture[str],
    campaign: str,
    names: str,
    shape: tuple[int, ...],
    method: str,
) -> None:
    argv = ["estimate", "--db", str(db), "--campaign", campaign, "--marginal", names]
    code, out, _ = _run(capsys, *argv, "--format", "json")
    assert code == 0
    answer = json.loads(out)["marginal"]
    f = np.asarray(answer["frequencies"])
    assert f.shape == np.asarray(answer["std_errors"]).shape == shape
    assert np.all(f >= 0) and f.sum() == pytest.approx(1.0)
    assert answer["method"] == method
    assert np.all(np.asarray(answer["ci_low"]) <= f + 1e-9)
    assert np.all(f <= np.asarray(answer["ci_high"]) + 1e-9)
    code, out, _ = _run(capsys, *argv, "--format", "table")
    assert code == 0 and f"marginal of {names.replace(',', ', ')}:" in out and "[" in out


@pytest.mark.parametrize(
    ("campaign", "names", "message"),
    [
        ("devices", "os,country", "'country'"),
        ("devices", "os,os", "distinct"),
        ("devices", "a,b,c,d", "A, A,B or A,B,C"),
        ("flags", "wifi,zz", "'zz'"),
    ],
)
def test_bad_marginals_name_the_attribute(
    db: Path, capsys: pytest.CaptureFixture[str], campaign: str, names: str, message: str
) -> None:
    argv = ["estimate", "--db", str(db), "--campaign", campaign, "--marginal", names]
    code, _, err = _run(capsys, *argv, "--format", "json")
    assert code == 2 and message in err
