"""The TypeScript SDK's own suite (``npm test``: tsc, the bundle, then ``node --test``) from
pytest, so the README's one test command runs it too."""

from __future__ import annotations

from tests.client_sdk_ts.conftest import dist_lock, npm, require_node


def test_npm_test_passes() -> None:
    require_node()
    with dist_lock(exclusive=True):  # npm test rebuilds dist/: no other worker may be using it
        result = npm("test", timeout=900)
    assert "# fail 0" in result.stdout
    assert "# pass 0" not in result.stdout
