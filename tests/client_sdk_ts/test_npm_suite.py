"""The TypeScript SDK's own suite (``npm test``: tsc, the bundle, then ``node --test``) from
pytest, so the README's one test command runs it too."""

from __future__ import annotations

from tests.client_sdk_ts.conftest import npm


def test_npm_test_passes(ts_build: object) -> None:
    # ``npm test`` is ``npm run build`` then ``npm run test:built``: the fixture builds (when a
    # source is newer than dist/) under an exclusive lock and keeps it shared while the suite
    # runs, so other workers' Node and browser tests run beside it instead of waiting.
    result = npm("run", "test:built", timeout=900)
    assert "# fail 0" in result.stdout
    assert "# pass 0" not in result.stdout
