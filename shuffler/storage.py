"""The shuffler's SQLite database (sqlite-utils over ``client_sdk.sqlite``): sealed reports
waiting for a batch, and the batches formed but not yet acknowledged by the collector.

What is stored, and what is not (Bittau et al., "Prochlo", SOSP 2017): for a pending report,
a fresh random id (the id the collector will see; ``WITHOUT ROWID``, so the table's order is
that random id's, not the arrival order), the campaign, its ``config_id``, the sealed envelope
and, once batched, the batch id. No address, user agent, time, or device report id: a retried
upload is recognised by a keyed BLAKE2b digest of the device's id (the key is this database's
own random secret), kept in ``seen``.

A batch is formed in one transaction (its reports marked with the batch id and a position from
a CSPRNG permutation), forwarded, and deleted only after the collector acknowledged it; a crash
in between resends the same batch id, which the collector answers idempotently.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
from collections.abc import Sequence

import numpy as np
import sqlite_utils

from client_sdk.randomness import SystemRandomSource, uniform_below
from client_sdk.sqlite import connect, immediate

__all__ = ["Batch", "ShufflerStorage", "csprng_permutation"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS pending (fresh_id TEXT PRIMARY KEY, campaign TEXT NOT NULL, "
    "config_id TEXT NOT NULL, envelope TEXT NOT NULL, batch_id TEXT, position INTEGER) "
    "WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS pending_by_campaign ON pending (campaign, batch_id)",
    "CREATE TABLE IF NOT EXISTS seen (digest TEXT PRIMARY KEY) WITHOUT ROWID",
)

Batch = tuple[str, str, str, list[tuple[str, str]]]
"""``(batch_id, campaign, config_id, [(fresh_id, envelope JSON)] in shuffled order)``."""


def csprng_permutation(n: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from the OS CSPRNG: Fisher-Yates with
    unbiased draws (``client_sdk.randomness.uniform_below``), vectorized draws, one swap loop."""
    order = np.arange(n)
    if n < 2:
        return order
    bounds = np.arange(n, 1, -1, dtype=np.int64)  # draw j_i uniform in [0, n - i)
    draws = uniform_below(SystemRandomSource(), bounds, len(bounds))
    for i, j in enumerate(draws.tolist()):
        k = i + int(j)
        order[i], order[k] = order[k], order[i]
    return order


class ShufflerStorage:
    """One connection to the shuffler's database (created with its schema)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        conn = connect(self.path, timeout=busy_timeout, synchronous="FULL", wal=True)
        self.db = sqlite_utils.Database(conn, execute_plugins=False)
        self.conn = conn
        with immediate(conn):
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (name, value) VALUES ('digest_key', ?)",
                [secrets.token_hex(32)],
            )
        self._key = bytes.fromhex(
            conn.execute("SELECT value FROM meta WHERE name = 'digest_key'").fetchone()[0]
        )

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ShufflerStorage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _digest(self, campaign: str, report_id: str) -> str:
        data = f"{campaign}\x00{report_id}".encode()
        return hashlib.blake2b(data, key=self._key, digest_size=16).hexdigest()

    def accept(
        self, campaign: str, config_id: str, reports: Sequence[tuple[str, str]]
    ) -> tuple[int, int]:
        """Store ``(device report id, envelope JSON)`` pairs in one committed transaction;
        ``(accepted, duplicate)`` (a device id seen before for the campaign is a duplicate)."""
        digests = [self._digest(campaign, report_id) for report_id, _ in reports]
        with immediate(self.conn) as conn:
            seen: set[str] = set()
            for start in range(0, len(digests), 500):  # SQLite's bound-parameter limit
                chunk = digests[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT digest FROM seen WHERE digest IN ({marks})"
                seen.update(row[0] for row in conn.execute(query, chunk))
            fresh: list[tuple[str, str]] = []
            for digest, (_, envelope) in zip(digests, reports, strict=True):
                if digest not in seen:
                    seen.add(digest)  # a repeat within the upload is a duplicate too
                    fresh.append((digest, envelope))
            conn.executemany("INSERT INTO seen (digest) VALUES (?)", [(d,) for d, _ in fresh])
            conn.executemany(
                "INSERT INTO pending (fresh_id, campaign, config_id, envelope) VALUES (?, ?, ?, ?)",
                [(secrets.token_hex(16), campaign, config_id, env) for _, env in fresh],
            )
        return len(fresh), len(reports) - len(fresh)

    def pending_counts(self) -> dict[str, int]:
        """Reports per campaign not yet in a batch (what ``/metrics`` says waits)."""
        rows = self.conn.execute(
            "SELECT campaign, count(*) FROM pending WHERE batch_id IS NULL GROUP BY campaign"
        ).fetchall()
        return {str(a): int(b) for a, b in rows}

    def in_flight(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM pending WHERE batch_id IS NOT NULL")
        return int(row.fetchone()[0])

    def form_batch(self, campaign: str, min_batch: int, max_batch: int) -> str | None:
        """Put at least ``min_batch`` (at most ``max_batch``) pending reports of ``campaign`` in
        a new batch with a CSPRNG order; its id, or ``None`` while fewer wait."""
        with immediate(self.conn) as conn:
            rows = conn.execute(
                "SELECT fresh_id FROM pending WHERE campaign = ? AND batch_id IS NULL LIMIT ?",
                [campaign, max_batch],
            ).fetchall()
            if len(rows) < min_batch:
                return None
            batch_id = secrets.token_hex(16)
            order = csprng_permutation(len(rows))
            conn.executemany(
                "UPDATE pending SET batch_id = ?, position = ? WHERE fresh_id = ?",
                [(batch_id, int(order[i]), row[0]) for i, row in enumerate(rows)],
            )
        return batch_id

    def open_batches(self) -> list[Batch]:
        """Every batch formed and not yet acknowledged, its reports in their shuffled order."""
        rows = self.conn.execute(
            "SELECT batch_id, campaign, config_id, fresh_id, envelope FROM pending "
            "WHERE batch_id IS NOT NULL ORDER BY batch_id, position"
        ).fetchall()
        batches: dict[str, Batch] = {}
        for batch_id, campaign, config_id, fresh_id, envelope in rows:
            batch = batches.setdefault(batch_id, (batch_id, campaign, config_id, []))
            batch[3].append((fresh_id, envelope))
        return list(batches.values())

    def delete_batch(self, batch_id: str) -> int:
        """Drop an acknowledged batch; how many reports it held."""
        with immediate(self.conn) as conn:
            cursor = conn.execute("DELETE FROM pending WHERE batch_id = ?", [batch_id])
            return int(cursor.rowcount)

    def drop_campaign_pending(self, campaign: str) -> None:  # pragma: no cover - operator use
        with immediate(self.conn) as conn:
            conn.execute("DELETE FROM pending WHERE campaign = ? AND batch_id IS NULL", [campaign])


def is_locked(error: sqlite3.OperationalError) -> bool:
    message = str(error).lower()
    return "locked" in message or "busy" in message
