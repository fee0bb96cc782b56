"""A real collector process (``ldp-collector serve``, gunicorn, 2 workers) for e2e tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.process import CollectorProcess


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("collector")
    process = CollectorProcess(root / "collector.db", workers=2, log_dir=root)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def stored_ids(db: str | Path, campaign: str) -> list[str]:
    """Every stored report id of a campaign (a list: duplicates would show)."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT r.report_id FROM reports r JOIN campaigns c ON c.id = r.campaign_id "
            "WHERE c.name = ?",
            [campaign],
        ).fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]
