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

import contextlib
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from client_sdk.sqlite import connect, immediate
from client_sdk.state import create_private_file

OUTBOX_FILE = "outbox.sqlite3"

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
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


class OutboxError(RuntimeError):
    """An outbox that exists but cannot be read as one (empty, truncated, not SQLite).

    Never treated as an empty queue: the reports it held may not have been sent, and a fresh
    outbox would hide that. Move the file aside (or delete it, accepting the loss) to go on.
    """


class Outbox:
    """Queued reports and cached campaign documents of one client (``state_dir``).

    A new outbox is built under a temporary name and linked into place complete, so the file is
    never seen empty or half-made; an existing one that is empty or unreadable raises
    :class:`OutboxError`. Sequence numbers are ``AUTOINCREMENT``: never reused, even after the
    newest reports were acknowledged and deleted.
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        directory = os.path.expanduser(os.fspath(state_dir))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.path = os.path.join(directory, OUTBOX_FILE)
        self._lock = threading.Lock()
        if not os.path.exists(self.path):
            _create(self.path)
        elif os.path.getsize(self.path) == 0:
            raise OutboxError(
                f"the outbox {self.path} is empty (0 bytes): it was truncated, not created so; "
                "move it aside to start a new one"
            )
        try:
            self._conn = connect(self.path, timeout=30.0, synchronous="FULL")
            tables = {
                row[0]
                for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as error:
            raise OutboxError(f"the outbox {self.path} is unreadable: {error}") from error
        if not {"outbox", "campaigns"} <= tables:
            self._conn.close()
            raise OutboxError(f"the outbox {self.path} has lost its tables")
        with self._lock, immediate(self._conn):
            _upgrade(self._conn)

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

    def drop_campaign(self, campaign: str) -> int:
        """Delete every queued report of a campaign; return how many."""
        with self._lock, immediate(self._conn):
            cursor = self._conn.execute("DELETE FROM outbox WHERE campaign = ?", [campaign])
            return int(cursor.rowcount)

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


def _create(path: str) -> None:
    """Build a complete, empty outbox beside ``path`` and link it into place (mode 0600)."""
    temporary = f"{path}.{secrets.token_hex(8)}.new"
    create_private_file(temporary)
    try:
        connection = connect(temporary, timeout=30.0, synchronous="FULL", wal=False)
        try:
            with immediate(connection):
                for statement in _SCHEMA:
                    connection.execute(statement)
        finally:
            connection.close()
        with contextlib.suppress(FileExistsError):  # another process won: its outbox stands
            os.link(temporary, path)
    finally:
        for leftover in (temporary, f"{temporary}-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _upgrade(connection: sqlite3.Connection) -> None:
    """Give an outbox made before sequence numbers were AUTOINCREMENT the new table."""
    (sql,) = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'outbox'"
    ).fetchone()
    if "AUTOINCREMENT" in str(sql).upper():
        return
    connection.execute("ALTER TABLE outbox RENAME TO outbox_old")
    connection.execute("DROP INDEX IF EXISTS outbox_by_campaign")
    for statement in _SCHEMA[:2]:
        connection.execute(statement)
    connection.execute("INSERT INTO outbox SELECT * FROM outbox_old ORDER BY seq")
    connection.execute("DROP TABLE outbox_old")
