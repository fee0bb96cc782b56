"""The TypeScript SDK (client_sdk_ts/) driven from pytest: its npm suite, a Node client and the
browser bundle in headless Chromium, each against real collector processes.

Node 20 and npm are needed; the package's node_modules are installed here with ``npm ci`` (under
the committed lock file) when missing, so the README's one test command runs these tests on a
fresh clone. Without Node or npm these tests skip saying so, except under CI
(``LDP_REQUIRE_NODE=1``, set by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import contextlib
import fcntl
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


def install_node_modules(package: Path) -> None:
    """``npm ci`` in ``package`` when its node_modules lacks the build tools; one pytest worker
    installs while the others wait (an exclusive lock on the package's lock file)."""
    with open(package / "package-lock.json") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if not (package / "node_modules" / "typescript").is_dir():
            result = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=package,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert result.returncode == 0, (
                f"npm ci in {package.name} failed:\n{result.stdout[-20000:]}\n{result.stderr}"
            )


def require_node() -> str:
    """The ``node`` executable (node_modules installed if missing), or a skip (a failure under
    CI) when Node.js or npm is not installed."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        missing = "Node.js 20 and npm are not installed"
        if os.environ.get("LDP_REQUIRE_NODE") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    install_node_modules(TS_DIR)
    return node


@contextlib.contextmanager
def dist_lock(exclusive: bool) -> Iterator[Any]:
    """A lock on ``dist/`` across pytest workers: exclusive to build it, shared to use it
    (a build rewrites files a Node process of another worker may be importing)."""
    lock = TS_DIR / "node_modules" / ".ldp-pytest-dist.lock"
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield handle


def stale() -> bool:
    """Whether ``dist/`` is missing or older than a source of the build."""
    built = DIST / "browser.js"
    if not built.exists() or not (DIST / "src" / "index.js").exists():
        return True
    sources = [*(TS_DIR / "src").rglob("*.ts"), *(TS_DIR / "test").rglob("*.ts")]
    sources += [
        *(TS_DIR / "scripts").glob("*.mjs"),
        TS_DIR / "package.json",
        TS_DIR / "tsconfig.json",
    ]
    return max(p.stat().st_mtime for p in sources) > built.stat().st_mtime


def npm(*arguments: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``npm ARGUMENTS`` in client_sdk_ts; fails with npm's output."""
    result = subprocess.run(
        ["npm", *arguments], cwd=TS_DIR, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, (
        f"npm {' '.join(arguments)} failed:\n{result.stdout[-20000:]}\n{result.stderr}"
    )
    return result


@pytest.fixture
def ts_build() -> Iterator[Path]:
    """The built package (``dist/src`` and ``dist/browser.js``): built when stale, and not
    rebuilt by another worker while the test uses it."""
    require_node()
    with dist_lock(exclusive=True) as handle:
        if stale():
            npm("run", "build")
        fcntl.flock(handle, fcntl.LOCK_SH)  # keep it, shared, for the test
        yield DIST


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


@pytest.fixture
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
