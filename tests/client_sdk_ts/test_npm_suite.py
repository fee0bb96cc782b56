"""The TypeScript SDK's own suite (``npm test``: tsc, then ``node --test``) from pytest, so the
README's one test command runs it too."""

from __future__ import annotations

import subprocess

from tests.client_sdk_ts.conftest import TS_DIR, require_node


def test_npm_test_passes() -> None:
    require_node()
    result = subprocess.run(
        ["npm", "test"], cwd=TS_DIR, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, f"npm test failed:\n{result.stdout[-20000:]}\n{result.stderr}"
    assert "# fail 0" in result.stdout
