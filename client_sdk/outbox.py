"""The persistent outbox: randomized reports waiting for upload, in SQLite in ``state_dir``.

Only what may leave the device is ever written here: the campaign name, the ``config_id`` the
report was made under, its random report id and its randomized wire payload. Never the raw
value. WAL with ``synchronous=FULL`` (``client_sdk.sqlite``): a report that ``record`` returned
from is on disk and survives a crash or power cut; a report is deleted only once the collector
acknowledged it.

Thread-safe: one connection, every operation under one lock (the outbox is small and local;
serializing its short transactions is simpler than a connection per thread and as fast).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from client_sdk.sqlite import connect, immediate

OUTBOX_FILE = "outbox.sqlite3"

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY,
        campaign TEXT NOT NULL,
        config_id TEXT NOT NULL,
        report_id TEXT NOT NULL UNIQUE,
        payload TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS outbox_by_campaign ON outbox (campaign, seq)",
    """
    CREATE TABLE IF NOT EXISTS campaigns (
        name TEXT PRIMARY KEY,
        document TEXT NOT NULL
    )
    """,
)


class QueuedReport(NamedTuple):
    seq: int
    config_id: str
    report_id: str
    payload: str  # compact JSON text


class Outbox:
    """Queued reports and cached campaign documents of one client (``state_dir``)."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        directory = os.path.expanduser(os.fspath(state_dir))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.path = os.path.join(directory, OUTBOX_FILE)
        self._lock = threading.Lock()
        self._conn = connect(self.path, timeout=30.0, synchronous="FULL")
        with self._lock, immediate(self._conn):
            for statement in _SCHEMA:
                self._conn.execute(statement)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- reports

    def append(self, campaign: str, config_id: str, rows: Sequence[tuple[str, str]]) -> None:
        """Queue ``(report_id, payload_json)`` rows in one durable transaction."""
        with self._lock, immediate(self._conn):
            self._conn.executemany(
                "INSERT INTO outbox (campaign, config_id, report_id, payload) VALUES (?, ?, ?, ?)",
                [(campaign, config_id, report_id, payload) for report_id, payload in rows],
            )

    def batch(self, campaign: str, limit: int) -> list[QueuedReport]:
        """The oldest ``limit`` queued reports of a campaign."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT seq, config_id, report_id, payload FROM outbox WHERE campaign = ? "
                "ORDER BY seq LIMIT ?",
                [campaign, limit],
            ).fetchall()
        return [QueuedReport(*row) for row in rows]

    def remove(self, seqs: Sequence[int]) -> None:
        """Delete reports (acknowledged, or rejected for good) in one transaction."""
        with self._lock, immediate(self._conn):
            self._conn.executemany("DELETE FROM outbox WHERE seq = ?", [(s,) for s in seqs])

    def drop_other_configs(self, campaign: str, config_id: str) -> int:
        """Delete the campaign's reports made under another config; return how many."""
        with self._lock:
            cursor = self._conn.execute(
                "DELETE FROM outbox WHERE campaign = ? AND config_id != ?", [campaign, config_id]
            )
            return int(cursor.rowcount)

    def campaigns(self) -> list[str]:
        """Campaigns with queued reports, in order of their oldest report."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT campaign FROM outbox GROUP BY campaign ORDER BY min(seq)"
            ).fetchall()
        return [str(row[0]) for row in rows]

    def count(self, campaign: str | None = None) -> int:
        with self._lock:
            if campaign is None:
                row = self._conn.execute("SELECT count(*) FROM outbox").fetchone()
            else:
                row = self._conn.execute(
                    "SELECT count(*) FROM outbox WHERE campaign = ?", [campaign]
                ).fetchone()
        return int(row[0])

    def report_ids(self, campaign: str | None = None) -> set[str]:
        """Ids of queued reports (for tests and diagnostics)."""
        with self._lock:
            if campaign is None:
                rows = self._conn.execute("SELECT report_id FROM outbox").fetchall()
            else:
                rows = self._conn.execute(
                    "SELECT report_id FROM outbox WHERE campaign = ?", [campaign]
                ).fetchall()
        return {str(row[0]) for row in rows}

    # -- cached campaign documents

    def cached_campaign(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT document FROM campaigns WHERE name = ?", [name]
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def cache_campaign(self, name: str, document: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT INTO campaigns (name, document) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET document = excluded.document",
                [name, json.dumps(document, sort_keys=True)],
            )
