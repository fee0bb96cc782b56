"""The shuffler's SQLite database (``client_sdk.sqlite``): sealed reports waiting for a batch,
and the batches formed but not yet acknowledged by the collector.

What is stored, and what is not (Bittau et al., "Prochlo", SOSP 2017): for a waiting report,
the campaign, its ``config_id``, the envelope's key id and sealed text, under a fresh id (the id
the collector will see; ``WITHOUT ROWID``, so the table's order is that id's, not the arrival
order). No address, user agent, arrival time, or device report id. The fresh id is a keyed
BLAKE2b digest of (campaign, device report id) under this database's own random secret: to the
collector a uniformly random id that cannot be joined with the device's (device ids are random,
and only the shuffler holds the key), while a retried upload gets the same fresh id again. A
retry of a report still waiting is a duplicate here; one already forwarded is forwarded again and
the collector, which stores a report id once, answers it as a duplicate. So nothing about past
reports has to be kept. Per campaign, one time is kept: when its oldest waiting report arrived
(``pools``), which the optional maximum wait needs, with the count of its waiting reports (the
cap per campaign reads it, not a scan).

Junk never stays for good: each waiting report keeps the minute it arrived (``arrived``, UNIX
time rounded up to :data:`ARRIVAL_GRANULARITY`: enough for a maximum age, and no finer), and
:meth:`ShufflerStorage.expire` drops those older than the operator's maximum age, counting them
per campaign (``expired``, what ``/metrics`` serves); :meth:`ShufflerStorage.accept` refuses an
upload that would take a campaign's waiting reports beyond a cap (:class:`PendingFull`), before
anything is committed, so nothing acknowledged is ever refused later.

A batch is formed in one transaction: its reports leave ``waiting`` and become one row of
``batches`` holding the request body the collector will receive, reports in a CSPRNG order. It
is deleted only after the collector acknowledged it; a crash in between resends the same batch
id, which the collector answers idempotently.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from client_sdk.randomness import SystemRandomSource, uniform_below
from client_sdk.sqlite import connect, immediate
from collector.dbguard import create_private_database

__all__ = [
    "ARRIVAL_GRANULARITY",
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_PENDING",
    "Batch",
    "ForwarderState",
    "PendingFull",
    "ShufflerStorage",
    "batch_sizes",
    "csprng_permutation",
]

ARRIVAL_GRANULARITY = 60
"""Seconds: a waiting report's arrival time is kept rounded up to this (module docstring)."""
DEFAULT_MAX_AGE = 7 * 24 * 3600.0
"""Seconds a report may wait for a batch before it is dropped (``--max-age``): a week."""
DEFAULT_MAX_PENDING = 1_000_000
"""Waiting reports per campaign beyond which uploads are refused (``--max-pending``): ten times
a ``min_batch`` of 10^5, about 0.5 GB of envelopes."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS waiting (campaign TEXT NOT NULL, config_id TEXT NOT NULL, "
    "fresh_id BLOB NOT NULL, key_id TEXT NOT NULL, sealed TEXT NOT NULL, "
    "arrived INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (campaign, config_id, fresh_id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS pools (campaign TEXT PRIMARY KEY, since REAL NOT NULL, "
    "pending INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS expired (campaign TEXT PRIMARY KEY, reports INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, campaign TEXT NOT NULL, "
    "config_id TEXT NOT NULL, size INTEGER NOT NULL, body TEXT NOT NULL, sent INTEGER) "
    "WITHOUT ROWID",
    # Which credential holds each waiting report, while it waits (shuffler.credentials): a
    # keyed digest of the credential, and the quota in force when it came; gone once batched.
    "CREATE TABLE IF NOT EXISTS holders (campaign TEXT NOT NULL, config_id TEXT NOT NULL, "
    "fresh_id BLOB NOT NULL, credential BLOB NOT NULL, quota INTEGER NOT NULL, "
    "PRIMARY KEY (campaign, config_id, fresh_id)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS holders_by_credential ON holders (campaign, credential)",
    # One row, kept by ``serve``'s watch over its forwarder (shuffler.supervisor).
    "CREATE TABLE IF NOT EXISTS forwarder (one INTEGER PRIMARY KEY CHECK (one = 1), "
    "restarts INTEGER NOT NULL, down_since REAL, last_exit TEXT)",
)


CACHE_KIB = 32 * 1024
"""Page cache per connection: the waiting table's random-order inserts touch pages all over it,
and with SQLite's default 2 MiB a table of a few 10^4 reports already goes back to the OS."""


class Batch(NamedTuple):
    """A formed batch: ``body`` is the JSON the collector's batches route receives; ``sent``,
    once it travels in parts, how many of its reports (in body order) the collector
    acknowledged (``None``: sent whole)."""

    batch_id: str
    campaign: str
    config_id: str
    size: int
    body: str
    sent: int | None = None


def csprng_permutation(n: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from the OS CSPRNG: Fisher-Yates with
    unbiased draws (``client_sdk.randomness.uniform_below``), vectorized draws, one swap loop."""
    order = np.arange(n)
    if n < 2:
        return order
    bounds = np.arange(n, 1, -1, dtype=np.int64)  # draw j_i uniform in [0, n - i)
    draws = uniform_below(SystemRandomSource(), bounds, len(bounds))
    listed = order.tolist()
    for i, j in enumerate(draws.tolist()):
        k = i + j
        listed[i], listed[k] = listed[k], listed[i]
    return np.asarray(listed, dtype=np.int64)


def batch_sizes(waiting: int, min_batch: int, max_batch: int) -> list[int]:
    """How ``waiting`` reports are cut into batches: as few as ``max_batch`` allows, of nearly
    equal sizes, each at least ``min_batch``; what cannot make a batch keeps waiting.

    >>> batch_sizes(150, 200, 1000), batch_sizes(2500, 200, 1000), batch_sizes(1050, 1000, 1000)
    ([], [834, 833, 833], [1000])
    """
    if waiting < min_batch or max_batch < min_batch:
        return []
    count = -(-waiting // max_batch)
    while count > 1 and waiting // count < min_batch:
        count -= 1
    if -(-waiting // count) > max_batch:  # max_batch < 2 min_batch: full batches only
        return [max_batch] * (waiting // max_batch)
    return [waiting // count + (i < waiting % count) for i in range(count)]


class PendingFull(RuntimeError):
    """An upload would take a campaign's waiting reports beyond the cap; nothing was stored."""

    def __init__(self, campaign: str, pending: int, cap: int) -> None:
        super().__init__(
            f"campaign {campaign!r} has {pending} reports waiting for a batch, and this "
            f"shuffler keeps at most {cap} (--max-pending); retry later"
        )
        self.campaign, self.pending, self.cap = campaign, pending, cap


class ForwarderState(NamedTuple):
    """What ``serve``'s watch last recorded: restarts since ``serve`` started, and while the
    forwarder is down, since when (UNIX time) and how it ended."""

    restarts: int
    down_since: float | None
    last_exit: str | None


class ShufflerStorage:
    """One connection to the shuffler's database (created with its schema)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self.path = os.fspath(path)
        create_private_database(self.path)  # the digest key and the envelopes: 0600
        conn = connect(
            self.path,
            timeout=busy_timeout,
            synchronous="FULL",
            wal=True,
            pragmas=[f"cache_size=-{CACHE_KIB}"],
        )
        self.conn = conn
        with immediate(conn):
            for statement in SCHEMA:
                conn.execute(statement)
            _upgrade(conn)
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

    def write_probe(self) -> None:
        """Commit a real write (``/readyz``): the digest key rewritten unchanged (through the WAL
        and its fsync, as an upload's transaction)."""
        with immediate(self.conn) as conn:
            conn.execute("UPDATE meta SET value = value WHERE name = 'digest_key'")

    def fresh_id(self, campaign: str, report_id: str) -> bytes:
        """The id the collector will see for a device's report (module docstring)."""
        data = campaign.encode() + b"\x00" + report_id.encode()
        return hashlib.blake2b(data, key=self._key, digest_size=16).digest()

    def accept(
        self,
        campaign: str,
        config_id: str,
        reports: Sequence[tuple[str, str, str]],
        *,
        max_pending: int | None = None,
    ) -> tuple[int, int]:
        """Store ``(device report id, key id, sealed text)`` triples in one committed
        transaction; ``(accepted, duplicate)`` (a report still waiting, or twice in the upload,
        is a duplicate). :class:`PendingFull`, with nothing stored, when the campaign's waiting
        reports and these would be more than ``max_pending``."""
        now = time.time()
        # Rounded up: a report is never dropped before it waited max_age.
        arrived = -int(-now // ARRIVAL_GRANULARITY) * ARRIVAL_GRANULARITY
        rows = sorted(  # in key order, stable: each page is written once, first copy kept
            [
                (campaign, config_id, self.fresh_id(campaign, report_id), key_id, sealed, arrived)
                for report_id, key_id, sealed in reports
            ],
            key=itemgetter(2),
        )
        with immediate(self.conn) as conn:
            if max_pending is not None:
                row = conn.execute("SELECT pending FROM pools WHERE campaign = ?", [campaign])
                found = row.fetchone()
                pending = 0 if found is None else int(found[0])
                if pending + len(rows) > max_pending:
                    raise PendingFull(campaign, pending, max_pending)
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO waiting (campaign, config_id, fresh_id, key_id, sealed, "
                "arrived) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            accepted = conn.total_changes - before
            if accepted:
                conn.execute(
                    "INSERT INTO pools (campaign, since, pending) VALUES (?, ?, ?) "
                    "ON CONFLICT (campaign) DO UPDATE SET pending = pending + excluded.pending",
                    [campaign, now, accepted],
                )
        return accepted, len(reports) - accepted

    def accept_held(
        self,
        campaign: str,
        config_id: str,
        reports: Sequence[tuple[str, str, str]],
        *,
        credential: bytes,
        quota: int,
        max_pending: int | None = None,
    ) -> tuple[int, int, list[int]]:
        """:meth:`accept` for the holder of ``credential`` (``shuffler.credentials``), who may
        have at most ``quota`` reports of ``campaign`` waiting: ``(accepted, duplicate,
        deferred)``, ``deferred`` the indices of the reports past the quota, not stored (the
        device sends them again once its waiting ones left in a batch). So a batch never holds
        more than ``quota`` reports of one credential. :class:`PendingFull` as for
        :meth:`accept`."""
        holder = hashlib.blake2b(
            b"credential\x00" + credential, key=self._key, digest_size=16
        ).digest()
        now = time.time()
        arrived = -int(-now // ARRIVAL_GRANULARITY) * ARRIVAL_GRANULARITY
        accepted = duplicate = 0
        deferred: list[int] = []
        with immediate(self.conn) as conn:
            if max_pending is not None:
                found = conn.execute(
                    "SELECT pending FROM pools WHERE campaign = ?", [campaign]
                ).fetchone()
                pending = 0 if found is None else int(found[0])
                if pending + min(len(reports), quota) > max_pending:
                    raise PendingFull(campaign, pending, max_pending)
            conn.execute(  # reports of this holder that left by any way no longer count
                "DELETE FROM holders WHERE campaign = ? AND credential = ? AND NOT EXISTS "
                "(SELECT 1 FROM waiting w WHERE w.campaign = holders.campaign "
                "AND w.config_id = holders.config_id AND w.fresh_id = holders.fresh_id)",
                [campaign, holder],
            )
            (held,) = conn.execute(
                "SELECT count(*) FROM holders WHERE campaign = ? AND credential = ?",
                [campaign, holder],
            ).fetchone()
            for index, (report_id, key_id, sealed) in enumerate(reports):
                fresh = self.fresh_id(campaign, report_id)
                known = conn.execute(
                    "SELECT 1 FROM waiting WHERE campaign = ? AND config_id = ? AND fresh_id = ?",
                    [campaign, config_id, fresh],
                ).fetchone()
                if known is not None:
                    duplicate += 1
                elif held >= quota:
                    deferred.append(index)
                else:
                    conn.execute(
                        "INSERT INTO waiting (campaign, config_id, fresh_id, key_id, sealed, "
                        "arrived) VALUES (?, ?, ?, ?, ?, ?)",
                        [campaign, config_id, fresh, key_id, sealed, arrived],
                    )
                    conn.execute(
                        "INSERT INTO holders (campaign, config_id, fresh_id, credential, quota) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [campaign, config_id, fresh, holder, quota],
                    )
                    held += 1
                    accepted += 1
            if accepted:
                conn.execute(
                    "INSERT INTO pools (campaign, since, pending) VALUES (?, ?, ?) "
                    "ON CONFLICT (campaign) DO UPDATE SET pending = pending + excluded.pending",
                    [campaign, now, accepted],
                )
        return accepted, duplicate, deferred

    def expire(self, max_age: float, *, now: float | None = None) -> dict[str, int]:
        """Drop the waiting reports that arrived more than ``max_age`` seconds ago (to the
        minute, :data:`ARRIVAL_GRANULARITY`), adding them to the campaign's ``expired`` count;
        how many per campaign. Only campaigns whose pool opened before the limit are read."""
        limit = (time.time() if now is None else now) - max_age
        dropped: dict[str, int] = {}
        with immediate(self.conn) as conn:
            old = conn.execute("SELECT campaign FROM pools WHERE since < ?", [limit]).fetchall()
            for (campaign,) in old:
                count = conn.execute(
                    "DELETE FROM waiting WHERE campaign = ? AND arrived < ?", [campaign, limit]
                ).rowcount
                if count:
                    dropped[str(campaign)] = count
                    conn.execute(
                        "INSERT INTO expired (campaign, reports) VALUES (?, ?) ON CONFLICT "
                        "(campaign) DO UPDATE SET reports = reports + excluded.reports",
                        [campaign, count],
                    )
                # The pool's time becomes its oldest remaining arrival (or the pool closes).
                conn.execute(
                    "UPDATE pools SET pending = pending - ?, since = coalesce((SELECT "
                    "min(arrived) FROM waiting WHERE campaign = ?), since) WHERE campaign = ?",
                    [count, campaign, campaign],
                )
                self._close_empty_pool(conn, campaign)
        return dropped

    def expired_counts(self) -> dict[str, int]:
        """Reports dropped per campaign for waiting longer than the maximum age, ever."""
        rows = self.conn.execute("SELECT campaign, reports FROM expired").fetchall()
        return {str(a): int(b) for a, b in rows}

    def waiting(self) -> dict[tuple[str, str], int]:
        """Reports not yet in a batch, per ``(campaign, config_id)``."""
        rows = self.conn.execute(
            "SELECT campaign, config_id, count(*) FROM waiting GROUP BY campaign, config_id"
        ).fetchall()
        return {(str(a), str(b)): int(c) for a, b, c in rows}

    def pending_counts(self) -> dict[str, int]:
        """Reports per campaign not yet in a batch (what ``/metrics`` says waits)."""
        counts: dict[str, int] = {}
        for (campaign, _), count in self.waiting().items():
            counts[campaign] = counts.get(campaign, 0) + count
        return counts

    def waiting_since(self) -> dict[str, float]:
        """Per campaign with waiting reports, when the oldest of them arrived (UNIX time)."""
        rows = self.conn.execute("SELECT campaign, since FROM pools").fetchall()
        return {str(a): float(b) for a, b in rows}

    def in_flight(self) -> int:
        """Reports in batches formed and not yet acknowledged."""
        row = self.conn.execute("SELECT coalesce(sum(size), 0) FROM batches").fetchone()
        return int(row[0])

    def form_batch(self, campaign: str, config_id: str, size: int) -> str | None:
        """Put ``size`` waiting reports of ``campaign`` under ``config_id`` (the ones of
        smallest fresh id: a uniformly random subset) in a new batch, in a CSPRNG order; its
        id, or ``None`` while fewer wait."""
        with immediate(self.conn) as conn:
            # Each report's JSON is written by SQLite: key ids and base64url text were checked
            # on upload, so there is nothing to escape.
            rows = conn.execute(
                """SELECT '{"id":"' || lower(hex(fresh_id)) || '","payload":{"key_id":"' """
                """|| key_id || '","sealed":"' || sealed || '"}}', fresh_id FROM waiting """
                "WHERE campaign = ? AND config_id = ? ORDER BY fresh_id LIMIT ?",
                [campaign, config_id, size],
            ).fetchall()
            if len(rows) < size or size < 1:
                return None
            batch_id = secrets.token_hex(16)
            reports = ",".join([rows[i][0] for i in csprng_permutation(len(rows)).tolist()])
            credentials = _credentials(conn, campaign, config_id, rows[-1][1], len(rows))
            body = (
                f'{{"batch_id":"{batch_id}","config_id":{json.dumps(config_id)},'
                f'{credentials}"reports":[{reports}]}}'
            )
            conn.execute(
                "INSERT INTO batches (batch_id, campaign, config_id, size, body) "
                "VALUES (?, ?, ?, ?, ?)",
                [batch_id, campaign, config_id, len(rows), body],
            )
            conn.execute(
                "DELETE FROM waiting WHERE campaign = ? AND config_id = ? AND fresh_id <= ?",
                [campaign, config_id, rows[-1][1]],
            )
            conn.execute(  # the batch's holders (and any left by reports gone before)
                "DELETE FROM holders WHERE campaign = ? AND config_id = ? AND fresh_id <= ?",
                [campaign, config_id, rows[-1][1]],
            )
            conn.execute(
                "UPDATE pools SET pending = pending - ? WHERE campaign = ?", [len(rows), campaign]
            )
            self._close_empty_pool(conn, campaign)
        return batch_id

    def open_batches(self) -> list[Batch]:
        """Every batch formed and not yet acknowledged."""
        rows = self.conn.execute(
            "SELECT batch_id, campaign, config_id, size, body, sent FROM batches ORDER BY batch_id"
        ).fetchall()
        return [
            Batch(str(a), str(b), str(c), int(d), str(e), None if f is None else int(f))
            for a, b, c, d, e, f in rows
        ]

    def batch_sent(self, batch_id: str, sent: int) -> None:
        """Record that the collector acknowledged the first ``sent`` reports of a batch that
        travels in parts (``0``: it will, from now on, even after a restart)."""
        with immediate(self.conn) as conn:
            conn.execute("UPDATE batches SET sent = ? WHERE batch_id = ?", [sent, batch_id])

    def delete_batch(self, batch_id: str) -> int:
        """Drop an acknowledged batch; how many reports it held."""
        with immediate(self.conn) as conn:
            row = conn.execute("SELECT size FROM batches WHERE batch_id = ?", [batch_id])
            found = row.fetchone()
            conn.execute("DELETE FROM batches WHERE batch_id = ?", [batch_id])
        return 0 if found is None else int(found[0])

    def drop_waiting(self, campaign: str, config_id: str) -> int:
        """Drop the waiting reports of ``campaign`` made under ``config_id`` (a configuration
        the collector no longer takes); how many there were."""
        with immediate(self.conn) as conn:
            cursor = conn.execute(
                "DELETE FROM waiting WHERE campaign = ? AND config_id = ?", [campaign, config_id]
            )
            conn.execute(
                "DELETE FROM holders WHERE campaign = ? AND config_id = ?", [campaign, config_id]
            )
            conn.execute(
                "UPDATE pools SET pending = pending - ? WHERE campaign = ?",
                [cursor.rowcount, campaign],
            )
            self._close_empty_pool(conn, campaign)
            return int(cursor.rowcount)

    def forwarder_started(self, *, restarts: int) -> None:
        """Record a forwarder just (re)started, after ``restarts`` restarts."""
        with immediate(self.conn) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO forwarder (one, restarts, down_since, last_exit) "
                "VALUES (1, ?, NULL, NULL)",
                [restarts],
            )

    def forwarder_down(self, how: str) -> None:
        """Record the forwarder gone (``how``: its exit, in words) from now on."""
        with immediate(self.conn) as conn:
            conn.execute(
                "UPDATE forwarder SET down_since = coalesce(down_since, ?), last_exit = ?",
                [time.time(), how],
            )

    def forwarder_state(self) -> ForwarderState | None:
        """The watch's record; ``None`` when no ``serve`` watches a forwarder here."""
        row = self.conn.execute(
            "SELECT restarts, down_since, last_exit FROM forwarder WHERE one = 1"
        ).fetchone()
        return None if row is None else ForwarderState(int(row[0]), row[1], row[2])

    @staticmethod
    def _close_empty_pool(conn: sqlite3.Connection, campaign: str) -> None:
        left = conn.execute("SELECT 1 FROM waiting WHERE campaign = ? LIMIT 1", [campaign])
        if left.fetchone() is None:
            conn.execute("DELETE FROM pools WHERE campaign = ?", [campaign])


def _credentials(
    conn: sqlite3.Connection, campaign: str, config_id: str, last: bytes, size: int
) -> str:
    """The batch's ``"credentials": {"per_credential", "uncredentialed"}`` member (with its
    comma), when any of its reports came with a credential: the largest quota in force (no
    credential has more reports in the batch) and how many came without one. Empty otherwise."""
    held, quota = conn.execute(
        "SELECT count(*), max(h.quota) FROM holders h JOIN waiting w ON w.campaign = h.campaign "
        "AND w.config_id = h.config_id AND w.fresh_id = h.fresh_id "
        "WHERE h.campaign = ? AND h.config_id = ? AND h.fresh_id <= ?",
        [campaign, config_id, last],
    ).fetchone()
    if not held:
        return ""
    return f'"credentials":{{"per_credential":{int(quota)},"uncredentialed":{size - held}}},'


def _upgrade(conn: sqlite3.Connection) -> None:
    """Give a database made before the maximum age, the cap and batches in parts their
    columns: waiting reports of unknown arrival count from now, each pool's count is taken
    once, and formed batches are sent whole (as they were)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(waiting)")}
    if "arrived" not in columns:
        conn.execute("ALTER TABLE waiting ADD COLUMN arrived INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE waiting SET arrived = ?", [int(time.time())])
    if "sent" not in {row[1] for row in conn.execute("PRAGMA table_info(batches)")}:
        conn.execute("ALTER TABLE batches ADD COLUMN sent INTEGER")
    if "pending" not in {row[1] for row in conn.execute("PRAGMA table_info(pools)")}:
        conn.execute("ALTER TABLE pools ADD COLUMN pending INTEGER NOT NULL DEFAULT 0")
        conn.execute(
            "UPDATE pools SET pending = "
            "(SELECT count(*) FROM waiting WHERE waiting.campaign = pools.campaign)"
        )
