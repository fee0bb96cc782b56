"""The TypeScript SDK (client_sdk_ts/) against the conformance vectors through this SDK's own
checker: node runs the built conformance CLI, ``python -m client_sdk.conformance check
--outputs`` reads what it wrote. Every mechanism the TypeScript registry holds must match every
case; the ones not ported yet are the only problems allowed (until REQUIRE_EVERY_MECHANISM)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from client_sdk.conformance import VECTORS_DIR, check_outputs

REQUIRE_EVERY_MECHANISM = False
"""Flip once every TypeScript group has landed: a vector file without outputs then fails."""

PACKAGE = Path(__file__).resolve().parents[2] / "client_sdk_ts"
CLI = PACKAGE / "dist" / "src" / "conformance-cli.js"
CATEGORICAL = {"grr", "sue", "oue", "ss", "olh", "blh", "hr", "dbitflip", "rappor"}

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None, reason="node is not installed: the TypeScript SDK cannot run"
)


def _built_cli() -> Path:
    """The compiled CLI, building the package first when dist/ is missing."""
    if not CLI.exists():
        npm = shutil.which("npm")
        assert npm is not None, "node is installed but npm is not: cannot build client_sdk_ts"
        if not (PACKAGE / "node_modules").exists():
            subprocess.run([npm, "ci"], cwd=PACKAGE, check=True, capture_output=True, timeout=300)
        build = [npm, "run", "build"]
        subprocess.run(build, cwd=PACKAGE, check=True, capture_output=True, timeout=300)
    return CLI


def test_the_typescript_outputs_pass_the_python_check(tmp_path: Path) -> None:
    outputs_file = tmp_path / "outputs.json"
    node = shutil.which("node")
    assert node is not None
    run = subprocess.run(
        [node, str(_built_cli()), "--dir", str(VECTORS_DIR), "--outputs", str(outputs_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    outputs = json.loads(outputs_file.read_text(encoding="utf-8"))
    assert set(outputs) >= CATEGORICAL, sorted(outputs)

    problems = check_outputs(outputs)
    unported = {path.stem for path in VECTORS_DIR.glob("*.json")} - set(outputs)
    if REQUIRE_EVERY_MECHANISM:
        assert problems == []
    else:
        assert sorted(problems) == sorted(f"{name}.json: no outputs" for name in unported)

    checker = subprocess.run(
        [sys.executable, "-m", "client_sdk.conformance", "check", "--outputs", str(outputs_file)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checker.returncode == (1 if unported else 0), checker.stdout + checker.stderr
    assert "expected" not in checker.stdout + checker.stderr  # no payload mismatch


def test_a_wrong_typescript_payload_is_named_by_the_check(tmp_path: Path) -> None:
    """The check is not vacuous: one changed payload of the TypeScript outputs is reported."""
    outputs_file = tmp_path / "outputs.json"
    node = shutil.which("node")
    assert node is not None
    subprocess.run(
        [node, str(_built_cli()), "--dir", str(VECTORS_DIR), "--outputs", str(outputs_file)],
        capture_output=True,
        timeout=300,
        check=True,
    )
    outputs = json.loads(outputs_file.read_text(encoding="utf-8"))
    outputs["grr"][0] = (outputs["grr"][0] + 1) % 5
    problems = check_outputs(outputs)
    assert any(problem.startswith("grr.json case 0: expected") for problem in problems), problems
