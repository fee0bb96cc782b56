"""The TypeScript SDK (client_sdk_ts/) driven from pytest: its npm suite, a Node client and the
browser bundle in headless Chromium, each against real collector processes.

Node and the package's node_modules (``cd client_sdk_ts && npm ci``) are needed; without them
these tests skip saying so, except under CI (``LDP_REQUIRE_NODE=1``, set by ``.ci/run``), where
they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.process import CollectorProcess

ROOT = Path(__file__).resolve().parents[2]
TS_DIR = ROOT / "client_sdk_ts"
DIST = TS_DIR / "dist"

# One campaign per kind of estimate, in order of preference: the first whose mechanism the
# built registry has is the one the Node and browser tests record to.
CAMPAIGNS: list[dict[str, Any]] = [
    {
        "name": "ts-theme",
        "mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 4},
        "domain": ["light", "dark", "system", "contrast"],
        "min_batch_size": 100,
    },
    {
        "name": "ts-latency",
        "mechanism": {"mechanism": "duchi", "epsilon": 2.0, "lower": 0.0, "upper": 10.0},
        "min_batch_size": 100,
    },
]
WEIGHTS = [0.5, 0.25, 0.15, 0.10]
"""The population of the categorical campaign (label i with probability WEIGHTS[i])."""


def require_node() -> str:
    """The ``node`` executable, or a skip (a failure under CI) saying what is missing."""
    node = shutil.which("node")
    missing = None
    if node is None or shutil.which("npm") is None:
        missing = "Node.js 20 and npm are not installed"
    elif not (TS_DIR / "node_modules" / "typescript").is_dir():
        missing = "client_sdk_ts/node_modules is missing: run `cd client_sdk_ts && npm ci`"
    if missing is not None:
        if os.environ.get("LDP_REQUIRE_NODE") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    assert node is not None
    return node


def npm_build() -> None:
    """``npm run build`` (tsc and the esbuild browser bundle); fails with npm's output."""
    result = subprocess.run(
        ["npm", "run", "build"], cwd=TS_DIR, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"npm run build failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="session")
def ts_build() -> Path:
    """The built package (``dist/src`` and ``dist/browser.js``), built once per session."""
    require_node()
    npm_build()
    return DIST


def registered(node: str) -> set[str]:
    """The mechanism names the built registry has."""
    script = (
        "import('./dist/src/index.js')"
        ".then(m => console.log(JSON.stringify(Object.keys(m.FACTORIES))))"
    )
    result = subprocess.run(
        [node, "-e", script], cwd=TS_DIR, capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(result.stdout))


@pytest.fixture(scope="session")
def ts_campaign(ts_build: Path) -> dict[str, Any]:
    """The first of :data:`CAMPAIGNS` whose mechanism the TypeScript registry has."""
    names = registered(require_node())
    for campaign in CAMPAIGNS:
        if campaign["mechanism"]["mechanism"] in names:
            return campaign
    pytest.skip(
        "the TypeScript registry has neither grr nor duchi yet (they come with the "
        "mechanism groups' branches h-tscore and h-tsnum)"
    )


def start_collector(root: Path, extra_args: list[str] | None = None) -> CollectorProcess:
    process = CollectorProcess(
        root / "collector.db", workers=1, log_dir=root, extra_args=extra_args or []
    )
    process.start()
    return process


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[CollectorProcess]:
    process = start_collector(tmp_path)
    try:
        yield process
    finally:
        process.stop()
