"""A fresh clone runs the TypeScript tests: the fixtures install node_modules with ``npm ci``
under the committed lock file instead of skipping."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.client_sdk_ts.conftest import TS_DIR, install_node_modules, require_node


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
