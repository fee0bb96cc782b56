"""The collector database's schema, as versioned migrations recorded in ``schema_migrations``.

:func:`migrate` applies the pending ones inside one ``BEGIN IMMEDIATE`` transaction, so
gunicorn workers starting together apply each exactly once. A schema change is a new function
appended to :data:`MIGRATIONS`; a migration never changes once released.
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable

import sqlite_utils

from client_sdk.sqlite import immediate

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SchemaError",
    "check_schema",
    "migrate",
    "schema_version",
]


class SchemaError(RuntimeError):
    """The database's schema is older or newer than this code."""


def _migration_1_initial(db: sqlite_utils.Database) -> None:
    db.execute(
        """
        CREATE TABLE campaigns (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            config_id TEXT NOT NULL,
            mechanism TEXT NOT NULL,  -- canonical JSON of the mechanism config
            domain TEXT,              -- JSON list of labels; NULL for numeric campaigns
            policy TEXT,              -- JSON object or NULL
            min_batch_size INTEGER NOT NULL,
            created TEXT NOT NULL
        )
        """
    )
    # seq is the insertion order (the export cursor). Deliberately no arrival time, IP address
    # or user agent: only the coarse UTC day.
    db.execute(
        """
        CREATE TABLE reports (
            seq INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
            report_id TEXT NOT NULL CHECK (length(report_id) = 32),
            payload TEXT NOT NULL,
            day TEXT NOT NULL,
            UNIQUE (campaign_id, report_id)
        )
        """
    )
    db.execute("CREATE INDEX reports_by_campaign ON reports (campaign_id)")
    db.execute(
        """
        CREATE TABLE counters (
            campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
            name TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            value INTEGER NOT NULL,
            PRIMARY KEY (campaign_id, name, label)
        ) WITHOUT ROWID
        """
    )


def _migration_2_shuffle(db: sqlite_utils.Database) -> None:
    # A shuffled campaign's central target (JSON), the deployment's X25519 key pairs (the newest
    # active one is served; retired ones still open old envelopes), and the shuffler batches
    # received: their size is what the central guarantee is computed from, their id makes a
    # forwarded batch idempotent.
    db.execute("ALTER TABLE campaigns ADD COLUMN shuffle TEXT")
    db.execute(
        """
        CREATE TABLE keys (
            key_id TEXT PRIMARY KEY,
            public_key TEXT NOT NULL,
            private_key TEXT NOT NULL,
            created TEXT NOT NULL,
            active INTEGER NOT NULL
        )
        """
    )
    db.execute(
        """
        CREATE TABLE batches (
            campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
            batch_id TEXT NOT NULL,
            size INTEGER NOT NULL,
            accepted INTEGER NOT NULL,
            duplicate INTEGER NOT NULL,
            rejected TEXT NOT NULL,  -- JSON list of the rejections answered
            day TEXT NOT NULL,
            PRIMARY KEY (campaign_id, batch_id)
        ) WITHOUT ROWID
        """
    )


def _migration_3_closed(db: sqlite_utils.Database) -> None:
    # A closed campaign takes no more reports; its reports and estimates stay. A table of its
    # own, so the campaign rows (and their config_id) never change.
    db.execute(
        """
        CREATE TABLE closed_campaigns (
            campaign_id INTEGER PRIMARY KEY REFERENCES campaigns (id),
            closed TEXT NOT NULL
        )
        """
    )


def _migration_4_batch_credentials(db: sqlite_utils.Database) -> None:
    # What the shuffler says of a batch's credentials (shuffler.credentials): the most reports
    # one credential may have in it, and how many came without a credential; NULL for a batch
    # from a shuffler that took uploads without credentials. The central guarantee's
    # assumption is derived from them (client_sdk.amplification.credentialed_guarantee).
    db.execute("ALTER TABLE batches ADD COLUMN per_credential INTEGER")
    db.execute("ALTER TABLE batches ADD COLUMN uncredentialed INTEGER")


def _migration_5_batch_parts(db: sqlite_utils.Database) -> None:
    # A shuffler batch too large for one request travels in parts (ranges of its reports): the
    # batch keeps one row in ``batches`` (its size, the guarantee's) and each part its own row
    # here, so a resent part is answered as before and stores nothing.
    db.execute(
        """
        CREATE TABLE batch_parts (
            campaign_id INTEGER NOT NULL REFERENCES campaigns (id),
            batch_id TEXT NOT NULL,
            start INTEGER NOT NULL,
            count INTEGER NOT NULL,
            accepted INTEGER NOT NULL,
            duplicate INTEGER NOT NULL,
            rejected TEXT NOT NULL,  -- JSON list of the rejections answered
            PRIMARY KEY (campaign_id, batch_id, start, count)
        ) WITHOUT ROWID
        """
    )
    db.execute("ALTER TABLE batches ADD COLUMN total INTEGER")


def _migration_6_nonces(db: sqlite_utils.Database) -> None:
    # A sealed report's nonce (client_sdk.sealing: 16 random bytes inside the envelope): unique
    # per campaign, so an envelope replayed under other report ids is stored once. NULL for
    # reports uploaded directly (no envelope), which the partial index leaves out.
    db.execute("ALTER TABLE reports ADD COLUMN nonce BLOB")
    db.execute(
        "CREATE UNIQUE INDEX reports_by_nonce ON reports (campaign_id, nonce) "
        "WHERE nonce IS NOT NULL"
    )


def _migration_7_dap(db: sqlite_utils.Database) -> None:
    # DAP aggregator tasks (collector.dap): the task's public part and this aggregator's
    # secrets as JSON. dap_reports keeps every report id accepted (the anti-replay record, for
    # good: a report's shares are cleared once aggregated); dap_jobs makes aggregation jobs
    # idempotent (the request's hash and the answer); dap_buckets are the aggregate shares per
    # time unit; dap_collections every batch interval collected (overlap refusal, and the
    # stored answer, so a retried collection re-sends the same noise, never fresh noise).
    db.execute(
        "CREATE TABLE dap_tasks (task_id TEXT PRIMARY KEY, role TEXT NOT NULL, "
        "config TEXT NOT NULL, created TEXT NOT NULL)"
    )
    db.execute(
        """
        CREATE TABLE dap_reports (
            task_id TEXT NOT NULL REFERENCES dap_tasks (task_id),
            report_id BLOB NOT NULL CHECK (length(report_id) = 16),
            time INTEGER NOT NULL,
            report BLOB,          -- the encoded Report (Leader), NULL once aggregated
            job_id BLOB,          -- the aggregation job that took it
            state TEXT NOT NULL,  -- start | aggregated | rejected
            PRIMARY KEY (task_id, report_id)
        ) WITHOUT ROWID
        """
    )
    db.execute("CREATE INDEX dap_reports_pending ON dap_reports (task_id, state)")
    # Refused and rejected reports by DAP ReportError name (metrics: nothing else is kept of
    # a refused upload).
    db.execute(
        "CREATE TABLE dap_counters (task_id TEXT NOT NULL, reason TEXT NOT NULL, "
        "value INTEGER NOT NULL, PRIMARY KEY (task_id, reason)) WITHOUT ROWID"
    )
    db.execute(
        """
        CREATE TABLE dap_jobs (
            task_id TEXT NOT NULL REFERENCES dap_tasks (task_id),
            job_id BLOB NOT NULL,
            request_hash BLOB NOT NULL,
            request BLOB,         -- Leader: the request, re-sent after a crash
            response BLOB,        -- Helper: the answer, repeated to a retry
            state TEXT NOT NULL,  -- sent | done
            PRIMARY KEY (task_id, job_id)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE dap_buckets (
            task_id TEXT NOT NULL REFERENCES dap_tasks (task_id),
            start INTEGER NOT NULL,
            agg_share BLOB NOT NULL,
            report_count INTEGER NOT NULL,
            checksum BLOB NOT NULL,
            PRIMARY KEY (task_id, start)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        """
        CREATE TABLE dap_collections (
            task_id TEXT NOT NULL REFERENCES dap_tasks (task_id),
            job_id BLOB NOT NULL,
            start INTEGER NOT NULL,
            duration INTEGER NOT NULL,
            request BLOB NOT NULL,
            response BLOB,
            PRIMARY KEY (task_id, job_id)
        )
        """
    )


def _migration_8_metadata(db: sqlite_utils.Database) -> None:
    # A campaign's optional metadata (client_sdk.campaign.METADATA_FIELDS: description, unit,
    # owner, expires, retention_days) as canonical JSON; NULL for none. Not part of config_id.
    db.execute("ALTER TABLE campaigns ADD COLUMN metadata TEXT")


def _migration_9_leases(db: sqlite_utils.Database) -> None:
    # Leases of background tasks shared by the workers (collector.retention): one holder at a
    # time, until ``held_until`` (epoch seconds; a crashed holder's lease expires), and the
    # time the task is next due, so it runs at most once per interval whatever the workers.
    db.execute(
        """
        CREATE TABLE leases (
            name TEXT PRIMARY KEY,
            holder TEXT,
            held_until REAL NOT NULL DEFAULT 0,
            next_due REAL NOT NULL DEFAULT 0
        ) WITHOUT ROWID
        """
    )


def _migration_10_dap_campaigns(db: sqlite_utils.Database) -> None:
    # Secure-aggregation campaigns (client_sdk.dap.campaign): a campaign row holds either a
    # mechanism (randomized on the device, reports stored here) or a ``dap`` object (the DAP
    # task's public part; its reports go to the Leader) with its optional ``local`` grr config.
    # mechanism and min_batch_size become NULL-able, so the table is rebuilt (SQLite cannot
    # drop a NOT NULL): the documented twelve steps of "ALTER TABLE", with foreign keys off
    # (``migrate``), row ids kept, so every reference to a campaign stays valid.
    db.execute(
        """
        CREATE TABLE campaigns_new (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            config_id TEXT NOT NULL,
            mechanism TEXT,           -- canonical JSON of the mechanism config; NULL for DAP
            domain TEXT,              -- JSON list of labels; NULL for numeric campaigns
            policy TEXT,              -- JSON object or NULL
            min_batch_size INTEGER,   -- NULL for DAP (the task's is the one that counts)
            created TEXT NOT NULL,
            shuffle TEXT,
            metadata TEXT,
            dap TEXT,                 -- canonical JSON of the dap object; NULL unless DAP
            local TEXT,               -- canonical JSON of a DAP campaign's grr config, or NULL
            CHECK ((mechanism IS NULL) <> (dap IS NULL)),
            CHECK (mechanism IS NULL OR min_batch_size IS NOT NULL),
            CHECK (dap IS NOT NULL OR local IS NULL)
        )
        """
    )
    db.execute(
        "INSERT INTO campaigns_new (id, name, config_id, mechanism, domain, policy, "
        "min_batch_size, created, shuffle, metadata) SELECT id, name, config_id, mechanism, "
        "domain, policy, min_batch_size, created, shuffle, metadata FROM campaigns"
    )
    db.execute("DROP TABLE campaigns")
    db.execute("ALTER TABLE campaigns_new RENAME TO campaigns")


MIGRATIONS: tuple[tuple[int, str, Callable[[sqlite_utils.Database], None]], ...] = (
    (1, "initial schema: campaigns, reports, counters", _migration_1_initial),
    (2, "shuffled campaigns: shuffle target, key pairs, batches", _migration_2_shuffle),
    (3, "closed campaigns", _migration_3_closed),
    (4, "shuffler batches: their credentials", _migration_4_batch_credentials),
    (5, "shuffler batches in parts", _migration_5_batch_parts),
    (6, "sealed reports' nonces, unique per campaign", _migration_6_nonces),
    (7, "DAP aggregator tasks, reports, jobs, buckets, collections", _migration_7_dap),
    (8, "campaign metadata: description, unit, owner, expires, retention", _migration_8_metadata),
    (9, "leases of the workers' background tasks (retention)", _migration_9_leases),
    (10, "secure-aggregation (DAP) campaigns", _migration_10_dap_campaigns),
)
"""``(version, description, migration)`` in version order."""

SCHEMA_VERSION = MIGRATIONS[-1][0]
"""The schema version this code reads and writes."""


def schema_version(db: sqlite_utils.Database) -> int:
    """The newest applied migration (0 for a database without any)."""
    if not db["schema_migrations"].exists():
        return 0
    row = db.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(
    db: sqlite_utils.Database,
    *,
    path: str,
    translate: Callable[[sqlite3.OperationalError], Exception] | None = None,
) -> int:
    """Switch to WAL and apply pending migrations (race-safe across processes).

    Returns :data:`SCHEMA_VERSION`; raises :class:`SchemaError` for a database newer than this
    code. ``translate`` maps the errors of taking the write lock (see ``client_sdk.sqlite``).
    """
    conn = db.conn
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as error:
        if translate is None:
            raise
        raise translate(error) from error
    # A migration may rebuild a table others reference (SQLite's "ALTER TABLE", steps 1-12):
    # foreign keys are off meanwhile (a no-op inside a transaction, so set before it) and
    # checked before the commit.
    foreign_keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys=OFF")
    try:
        _apply(db, path=path, translate=translate)
    finally:
        conn.execute(f"PRAGMA foreign_keys={int(foreign_keys)}")
    return SCHEMA_VERSION


def _apply(
    db: sqlite_utils.Database,
    *,
    path: str,
    translate: Callable[[sqlite3.OperationalError], Exception] | None,
) -> None:
    conn = db.conn
    with immediate(conn, translate=translate):
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)"
        )
        current = schema_version(db)
        if current > SCHEMA_VERSION:
            raise SchemaError(
                f"database {path} has schema version {current}, newer than this "
                f"collector's {SCHEMA_VERSION}"
            )
        for version, name, migration in MIGRATIONS:
            if version > current:
                migration(db)
                db.execute(
                    "INSERT INTO schema_migrations (version, name, applied) VALUES (?, ?, ?)",
                    [version, name, _now()],
                )
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise SchemaError(f"database {path}: a migration broke foreign keys: {broken[:5]}")


def check_schema(db: sqlite_utils.Database, *, path: str) -> None:
    """Raise :class:`SchemaError` unless the database is at :data:`SCHEMA_VERSION`."""
    version = schema_version(db)
    if version != SCHEMA_VERSION:
        raise SchemaError(
            f"database {path} has schema version {version}; this code needs "
            f"{SCHEMA_VERSION} (run `ldp-collector init-db --db {path}`)"
        )


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
