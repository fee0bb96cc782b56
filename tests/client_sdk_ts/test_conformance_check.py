"""The TypeScript SDK (client_sdk_ts/) against the conformance vectors through this SDK's own
checker: node runs the built conformance CLI, ``python -m client_sdk.conformance check
--outputs`` reads what it wrote. Every vector file must have outputs, and every case must match."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from client_sdk.conformance import VECTORS_DIR, check_outputs
from tests.client_sdk_ts.conftest import require_node


def _run_cli(ts_build: Path, outputs_file: Path) -> subprocess.CompletedProcess[str]:
    """The built conformance CLI over every vector file (dist/ held by the shared lock)."""
    return subprocess.run(
        [
            require_node(),
            str(ts_build / "src" / "conformance-cli.js"),
            "--dir",
            str(VECTORS_DIR),
            "--outputs",
            str(outputs_file),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_typescript_outputs_pass_the_python_check(tmp_path: Path, ts_build: Path) -> None:
    outputs_file = tmp_path / "outputs.json"
    run = _run_cli(ts_build, outputs_file)
    assert run.returncode == 0, run.stderr
    outputs = json.loads(outputs_file.read_text(encoding="utf-8"))

    assert set(outputs) == {path.stem for path in VECTORS_DIR.glob("*.json")}
    assert check_outputs(outputs) == []

    checker = subprocess.run(
        [sys.executable, "-m", "client_sdk.conformance", "check", "--outputs", str(outputs_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checker.returncode == 0, checker.stdout + checker.stderr
    assert "expected" not in checker.stdout + checker.stderr  # no payload mismatch


def test_a_wrong_typescript_payload_is_named_by_the_check(tmp_path: Path, ts_build: Path) -> None:
    """The check is not vacuous: one changed payload of the TypeScript outputs is reported."""
    outputs_file = tmp_path / "outputs.json"
    run = _run_cli(ts_build, outputs_file)
    assert run.returncode == 0, run.stderr
    outputs = json.loads(outputs_file.read_text(encoding="utf-8"))
    outputs["grr"][0] = (outputs["grr"][0] + 1) % 5
    problems = check_outputs(outputs)
    assert any(problem.startswith("grr.json case 0: expected") for problem in problems), problems
