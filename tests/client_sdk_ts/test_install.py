"""A fresh clone runs the TypeScript tests: the fixtures install node_modules with ``npm ci``
under the committed lock file instead of skipping."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

from tests.client_sdk_ts.conftest import TS_DIR, install_node_modules, npm, require_node


def test_missing_node_modules_are_installed_from_the_lock_file(tmp_path: Path) -> None:
    require_node()  # skips (fails under CI) without Node.js and npm
    for name in ("package.json", "package-lock.json"):
        shutil.copy(TS_DIR / name, tmp_path / name)
    assert not (tmp_path / "node_modules").exists()

    install_node_modules(tmp_path)
    typescript = tmp_path / "node_modules" / "typescript"
    assert typescript.is_dir()
    assert (tmp_path / "node_modules" / "@noble" / "hashes").is_dir()

    installed = typescript.stat().st_mtime_ns
    install_node_modules(tmp_path)  # present: not installed again
    assert typescript.stat().st_mtime_ns == installed


def test_the_packed_package_holds_both_browser_builds_and_imports(
    ts_build: Path, tmp_path: Path
) -> None:
    """What ``npm pack`` ships (package.json ``files``): the Node entry, both browser builds and
    the chunks; the packed entry and single-module build import and have every mechanism."""
    packed = npm("pack", "--pack-destination", str(tmp_path), "--json")
    [tarball] = json.loads(packed.stdout)
    files = {entry["path"] for entry in tarball["files"]}
    assert {"dist/src/index.js", "dist/browser.js", "dist/browser-full.js"} <= files
    chunks = [path for path in files if path.startswith("dist/browser/")]
    assert any(path.startswith("dist/browser/sfp-") for path in chunks), sorted(files)
    assert not any(path.startswith("dist/test/") for path in files)  # tests are not shipped
    with tarfile.open(tmp_path / tarball["filename"]) as archive:
        archive.extractall(tmp_path, filter="data")
    package = tmp_path / "package"
    (package / "node_modules").symlink_to(TS_DIR / "node_modules", target_is_directory=True)
    script = (
        "const node = await import('./dist/src/index.js');"
        "const full = await import('./dist/browser-full.js');"
        "console.log(JSON.stringify([Object.keys(node.FACTORIES).length,"
        " Object.keys(full.FACTORIES).length, typeof node.TelemetryClient]));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    node_count, full_count, client = json.loads(done.stdout)
    assert node_count == full_count >= 24 and client == "function"
