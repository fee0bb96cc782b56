"""Session-wide pytest settings: the order in which test files are handed out."""

from __future__ import annotations

import pytest

#: Files that take the longest on one worker (a minute of real processes or of waiting): run
#: first, so that xdist (``--dist loadfile``, which hands out files in collection order) does not
#: leave one of them running alone at the end while the other workers idle.
LONGEST_FIRST = (
    "tests/client_sdk_ts/test_npm_suite.py",
    "tests/shuffler/test_pending_limits.py",
    "tests/test_readme.py",
    "tests/test_packaging.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
