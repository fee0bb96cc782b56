"""Durable storage of campaigns and randomized reports in SQLite, through sqlite-utils.

Never imports Flask: the web layer parses and validates, then calls this module; the analysis
package reads stored reports through it too (docs/architecture.md).

What is stored, and what is not:

* ``campaigns``: name, the canonical mechanism config, domain labels, policy,
  ``min_batch_size`` (validated by ``client_sdk.campaign``, as the client verifies them),
  ``config_id`` (``client_sdk.protocol.campaign_config_id`` of that content) and the creation
  time. A campaign is immutable once created. A secure-aggregation campaign (docs/dap.md) has
  a ``dap`` object (and an optional ``local`` grr config) instead of a mechanism, validated by
  ``client_sdk.dap.campaign``: it is stored and served (:class:`StoredDapCampaign`), but its
  reports go to its DAP Leader, never here, so :meth:`Storage.get_campaign` (the campaigns
  that take reports and have estimates) refuses it with :class:`SecureAggregationCampaign`.
* ``reports``: the campaign, the client's random 128-bit report id (32 lowercase hex, unique per
  campaign: the first copy wins, later copies are counted as duplicates), the compact JSON
  payload, the UTC *day* it arrived, and for a sealed report the random nonce from inside its
  envelope (``client_sdk.sealing``; unique per campaign, so a replayed envelope is stored once).
  No IP address, no user agent, no precise time.
* ``counters``: accepted, duplicate and rejected-by-reason report counts per campaign, updated
  in the same transaction as the reports they count, so every worker process sees the same
  exact totals (this is what ``/metrics`` serves).

Durability and concurrency (``client_sdk.sqlite``): WAL journal, ``synchronous=FULL`` by
default (a committed upload survives a power cut, not only a process crash), a busy timeout, and
one ``BEGIN IMMEDIATE`` transaction per upload (the write lock is taken up front, so two gunicorn
workers never deadlock upgrading a read lock). A database still locked after the timeout raises
:class:`StorageBusy`, which the web layer turns into ``503`` with ``Retry-After``.

Schema changes are versioned migrations (``collector.migrations``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sqlite_utils

from client_sdk.campaign import (
    CAMPAIGN_NAME_PATTERN,
    METADATA_FIELDS,
    PROTOCOL_VERSION,
    normalize_campaign,
)
from client_sdk.config import canonical_json
from client_sdk.mechanisms import Mechanism, Reports, mechanism_from_config
from client_sdk.mechanisms._validation import check_int
from client_sdk.protocol import campaign_config_id, is_report_id
from client_sdk.sqlite import connect, immediate
from collector.calibration import calibrate_campaign
from collector.dbguard import create_private_database
from collector.migrations import SCHEMA_VERSION, SchemaError, check_schema, migrate, schema_version

__all__ = [
    "CAMPAIGN_NAME_PATTERN",
    "CAMPAIGN_STATUSES",
    "SCHEMA_VERSION",
    "AnyStoredCampaign",
    "CampaignConflict",
    "CampaignNotEmpty",
    "CampaignNotFound",
    "ExportPage",
    "InsertResult",
    "SchemaError",
    "SecureAggregationCampaign",
    "Storage",
    "StorageBusy",
    "StoredCampaign",
    "StoredDapCampaign",
    "decode_rows",
    "normalize_campaign",
    "normalize_dap_campaign",
    "utc_today",
]

CAMPAIGN_STATUSES = ("open", "closed", "expired")
"""A campaign's ``status``, the one word every output uses for whether it takes reports:
``open``; ``closed`` (``ldp-collector campaign close``; uploads get 410 ``campaign-closed``);
``expired`` (past its ``expires`` day; 410 ``campaign-expired``). Whether an *estimate* is
shown is another matter, its ``estimate_status`` (``analysis.dashboard``: released/withheld)."""

CACHE_KIB = 64 * 1024
"""SQLite page cache per connection, in KiB."""
WAL_AUTOCHECKPOINT_PAGES = 10_000
"""Checkpoint the WAL into the database every this many pages (about 40 MB)."""


class CampaignNotFound(LookupError):
    """No campaign of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no campaign named {name!r}")
        self.name = name


class CampaignConflict(ValueError):
    """A campaign of that name exists with different content (campaigns are immutable)."""


class CampaignNotEmpty(ValueError):
    """A campaign to delete still has stored reports, and deleting them was not asked for."""

    def __init__(self, name: str, reports: int) -> None:
        super().__init__(
            f"campaign {name!r} still has {reports} stored reports; delete them with it "
            "explicitly (ldp-collector campaign delete --with-reports, or DELETE "
            "/v1/campaigns/<name>?with_reports=1), or close it instead"
        )
        self.reports = reports


class SecureAggregationCampaign(LookupError):
    """The campaign is aggregated by a DAP pair: no reports of it are stored here, and its
    result is collected from the Leader (``ldp-analyze collect``), not estimated here."""

    def __init__(self, name: str, leader: str, task_id: str) -> None:
        super().__init__(
            f"campaign {name!r} is a secure-aggregation campaign: devices upload its reports "
            f"to its DAP Leader {leader} (task {task_id}), never to this collector, and its "
            "result is collected from the Leader with `ldp-analyze collect --task TASK_FILE` "
            "(docs/dap.md), not estimated from reports stored here"
        )
        self.name, self.leader, self.task_id = name, leader, task_id


class StorageBusy(RuntimeError):
    """The database stayed locked beyond the busy timeout; retry later."""


@dataclasses.dataclass(frozen=True)
class StoredCampaign:
    """A campaign as stored: its mechanism object, canonical config and identifiers."""

    name: str
    mechanism: Mechanism
    config: dict[str, Any]
    domain: list[str] | None
    policy: dict[str, Any] | None
    config_id: str
    min_batch_size: int
    created: str
    shuffle: dict[str, Any] | None = None
    id: int | None = dataclasses.field(default=None, compare=False)
    """The campaign's row id in this database (``None`` for one built outside storage): the
    storage methods given this campaign use it instead of looking the name up again."""
    closed_at: str | None = dataclasses.field(default=None, compare=False)
    """When it was closed to new reports, as read with it (``None``: open)."""
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    """``client_sdk.campaign.METADATA_FIELDS`` the campaign was created with (not hashed)."""

    @property
    def expires(self) -> datetime.date | None:
        """The last UTC day the campaign takes reports (``None``: no expiry)."""
        return _expires(self.metadata)

    def status(self, today: datetime.date | None = None) -> str:
        """Whether it takes reports on ``today`` (default :func:`utc_today`): one of
        :data:`CAMPAIGN_STATUSES`, in the order uploads are refused (expiry first)."""
        return _status(self.expires, self.closed_at, today)

    def document(self) -> dict[str, Any]:
        """The JSON document the HTTP API serves (``config_id`` included)."""
        document = {
            "name": self.name,
            "protocol": PROTOCOL_VERSION,
            "mechanism": self.config,
            "domain": self.domain,
            "policy": self.policy,
            "min_batch_size": self.min_batch_size,
            "config_id": self.config_id,
            "created": self.created,
        }
        if self.shuffle is not None:
            document["shuffle"] = self.shuffle
        document.update(self.metadata)
        return document


@dataclasses.dataclass(frozen=True)
class StoredDapCampaign:
    """A secure-aggregation campaign as stored: the content ``config_id`` hashes
    (``client_sdk.dap.campaign.dap_campaign_content``), verified when created."""

    name: str
    dap: dict[str, Any]
    local: dict[str, Any] | None
    domain: list[str] | None
    policy: dict[str, Any] | None
    config_id: str
    created: str
    id: int | None = dataclasses.field(default=None, compare=False)
    closed_at: str | None = dataclasses.field(default=None, compare=False)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def leader(self) -> str:
        """The Leader's endpoint, where devices upload the campaign's reports."""
        return str(self.dap["leader"])

    @property
    def task_id(self) -> str:
        """The DAP task's id (unpadded base64url)."""
        return str(self.dap["task_id"])

    @property
    def expires(self) -> datetime.date | None:
        """The last UTC day the campaign takes reports (``None``: no expiry)."""
        return _expires(self.metadata)

    def status(self, today: datetime.date | None = None) -> str:
        """One of :data:`CAMPAIGN_STATUSES`, as :meth:`StoredCampaign.status`. The collector
        states it; the Leader is what takes or refuses the reports."""
        return _status(self.expires, self.closed_at, today)

    def document(self) -> dict[str, Any]:
        """The document the HTTP API serves: what ``DapCampaign.from_document`` verifies on
        the device (``protocol``, the hashed content, ``config_id``), plus ``created`` and the
        metadata, neither hashed."""
        return {
            "name": self.name,
            "protocol": PROTOCOL_VERSION,
            "dap": self.dap,
            "local": self.local,
            "domain": self.domain,
            "policy": self.policy,
            "config_id": self.config_id,
            "created": self.created,
            **self.metadata,
        }


AnyStoredCampaign = StoredCampaign | StoredDapCampaign
"""A stored campaign of either kind."""


def _expires(metadata: Mapping[str, Any]) -> datetime.date | None:
    expires = metadata.get("expires")
    return None if expires is None else datetime.date.fromisoformat(expires)


def _status(
    expires: datetime.date | None, closed_at: str | None, today: datetime.date | None
) -> str:
    if expires is not None and (today or utc_today()) > expires:
        return "expired"
    return "open" if closed_at is None else "closed"


def normalize_dap_campaign(document: Any) -> dict[str, Any]:
    """A secure-aggregation campaign document to create, verified by the device's own parser
    (``client_sdk.dap.campaign.dap_campaign_document``, then ``DapCampaign.from_document``)
    with its ``config_id`` computed; a ``config_id`` in ``document`` must be that one.
    ``ValueError`` naming the field (and the value) otherwise."""
    from client_sdk.dap.campaign import DAP_CAMPAIGN_FIELDS, dap_campaign_document

    if not isinstance(document, dict):
        raise ValueError(f"a campaign must be a JSON object; got {type(document).__name__}")
    unknown = sorted(str(k) for k in set(document) - DAP_CAMPAIGN_FIELDS - {"config_id"})
    if unknown:
        raise ValueError(
            f"unknown field(s) of a secure-aggregation campaign: {', '.join(unknown)[:200]} "
            f"(it has {', '.join(sorted(DAP_CAMPAIGN_FIELDS))} and optionally config_id)"
        )
    name = document.get("name")
    if not isinstance(name, str) or CAMPAIGN_NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(f"name must be a campaign name ({CAMPAIGN_NAME_PATTERN.pattern})")
    protocol = document.get("protocol", PROTOCOL_VERSION)
    if isinstance(protocol, bool) or protocol != PROTOCOL_VERSION:
        raise ValueError(f"protocol must be {PROTOCOL_VERSION}; got {protocol!r:.40}")
    for field, kind in (("dap", dict), ("local", dict), ("domain", list), ("policy", dict)):
        value = document.get(field)
        if not isinstance(value, kind) and (field == "dap" or value is not None):
            wanted = "a JSON object" if kind is dict else "a JSON list"
            raise ValueError(
                f"{field} must be {wanted}{'' if field == 'dap' else ' or null'}; "
                f"got {type(value).__name__}"
            )
    local = document.get("local")
    if local is not None:
        try:
            local = mechanism_from_config(local).to_config()
        except (TypeError, KeyError, ValueError) as error:
            raise ValueError(f"local: {error}") from None
    built = dap_campaign_document(
        name,
        document["dap"],
        local=local,
        domain=document.get("domain"),
        policy=document.get("policy"),
        **{k: document[k] for k in METADATA_FIELDS if document.get(k) is not None},
    )
    given = document.get("config_id")
    if given is not None and given != built["config_id"]:
        raise ValueError(
            f"config_id {given!r:.40} does not match the content (expected {built['config_id']})"
        )
    return built


@dataclasses.dataclass(frozen=True)
class InsertResult:
    """How many reports of an upload were newly stored, and how many were already there."""

    accepted: int
    duplicate: int


@dataclasses.dataclass(frozen=True)
class ExportPage:
    """The extent of one export page: the stored reports with ``after < seq <= cursor``.

    ``cursor`` is where the next page starts (pass it back as ``after``); ``has_more`` says
    whether reports beyond this page existed when the page was cut. Read its rows with
    :meth:`Storage.export_rows`.
    """

    campaign: str
    after: int
    cursor: int
    has_more: bool


@functools.lru_cache(maxsize=256)
def _mechanism_for(config_json: str) -> Mechanism:
    """Mechanisms are immutable and configs canonical, so one object per config is shared."""
    return mechanism_from_config(json.loads(config_json), stored=True)


# ---- the storage object ------------------------------------------------------------------------


class Storage:
    """One SQLite connection to the collector's database.

    :param path: the database file (created, with its schema, unless ``create=False``).
    :param busy_timeout: seconds to wait for another writer before :class:`StorageBusy`.
    :param synchronous: SQLite's ``synchronous`` pragma; ``FULL`` (default) fsyncs every
        commit, so an acknowledged upload survives a power cut; ``NORMAL`` survives process
        crashes only.
    :param create: ``False`` opens an existing, up-to-date database and never writes to it
        unless asked (what ``analysis`` uses); a missing file is ``FileNotFoundError``.

    Not thread-safe: open one per thread (the web layer opens one per request).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: str = "FULL",
        create: bool = True,
        check_same_thread: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        if not create and not os.path.exists(self.path):
            raise FileNotFoundError(f"no collector database at {self.path}")
        if create:
            create_private_database(self.path)  # it will hold the private keys: 0600
        # check_same_thread=False only for connections that one thread uses and another may
        # close (the web layer's per-thread connections, closed when the app goes away).
        # The journal switches to WAL in migrate(): a read-only user never writes the header.
        conn = connect(
            self.path,
            timeout=busy_timeout,
            synchronous=synchronous,
            wal=False,
            foreign_keys=True,
            check_same_thread=check_same_thread,
            # Report ids are random, so every upload dirties index pages all over the B-tree.
            # A larger cache keeps them in memory, and checkpointing every ~40 MB of WAL instead
            # of ~4 MB writes each re-dirtied page back once per checkpoint, not once per few
            # uploads: about twice the insert rate (scripts/bench_collector.py).
            pragmas=(
                f"cache_size=-{CACHE_KIB}",
                f"wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
                f"journal_size_limit={64 * 1024 * 1024}",
            ),
        )
        try:
            self.db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
            if create and schema_version(self.db) != SCHEMA_VERSION:
                self.migrate()
            else:
                check_schema(self.db, path=self.path)
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    # -- lifecycle

    def close(self) -> None:
        self.db.conn.close()

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; rolled back on any error."""
        return immediate(self.db.conn, translate=_translate)

    def migrate(self) -> int:
        """Apply pending migrations (race-safe across processes); return the schema version."""
        return migrate(self.db, path=self.path, translate=_translate)

    def check_writable(self) -> None:
        """Take and release the write lock (``/readyz``); raises if the database is not writable."""
        with self._write():
            pass

    # -- campaigns

    def create_campaign(
        self, document: Any, *, max_body: int | None = None
    ) -> tuple[AnyStoredCampaign, bool]:
        """Create a campaign from its document; return it and whether it is new.

        The same content again is idempotent (``created`` is ``False``); different content for
        an existing name raises :class:`CampaignConflict`. Invalid documents raise ``ValueError``,
        and so does a shuffled campaign whose ``min_batch`` sealed reports would not fit one
        request body of ``max_body`` bytes (the collector's limit; :func:`check_batch_fits`).
        A document with a ``dap`` object is a secure-aggregation campaign
        (:func:`normalize_dap_campaign`).
        """
        if isinstance(document, dict) and "dap" in document:
            return self._create_dap_campaign(document)
        normalized = normalize_campaign(calibrate_campaign(document))
        content_id = campaign_config_id(
            mechanism=normalized["mechanism"],
            domain=normalized["domain"],
            policy=normalized["policy"],
            min_batch_size=normalized["min_batch_size"],
            shuffle=normalized.get("shuffle"),
        )
        if max_body is not None and "shuffle" in normalized:
            check_batch_fits({**normalized, "config_id": content_id}, max_body)
        metadata = {k: normalized[k] for k in METADATA_FIELDS if k in normalized}
        with self._write() as conn:
            row = conn.execute(
                f"{_CAMPAIGN_SELECT} WHERE campaigns.name = ?", [normalized["name"]]
            ).fetchone()
            if row is not None:
                existing = _same_campaign(_any_from_row(row), content_id, metadata)
                if not isinstance(existing, StoredCampaign):
                    raise CampaignConflict(f"campaign {existing.name!r} exists as a DAP campaign")
                return existing, False
            created = _now()
            conn.execute(
                "INSERT INTO campaigns (name, config_id, mechanism, domain, policy, "
                "min_batch_size, created, shuffle, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    normalized["name"],
                    content_id,
                    canonical_json(normalized["mechanism"]),
                    None if normalized["domain"] is None else canonical_json(normalized["domain"]),
                    None if normalized["policy"] is None else canonical_json(normalized["policy"]),
                    normalized["min_batch_size"],
                    created,
                    None if "shuffle" not in normalized else canonical_json(normalized["shuffle"]),
                    canonical_json(metadata) if metadata else None,
                ],
            )
        return self.get_campaign(normalized["name"]), True

    def _create_dap_campaign(self, document: Any) -> tuple[StoredDapCampaign, bool]:
        """:meth:`create_campaign` of a secure-aggregation campaign."""
        built = normalize_dap_campaign(document)
        metadata = {k: built[k] for k in METADATA_FIELDS if k in built}

        def text(value: Any) -> str | None:
            return None if value is None else canonical_json(value)

        with self._write() as conn:
            row = conn.execute(
                f"{_CAMPAIGN_SELECT} WHERE campaigns.name = ?", [built["name"]]
            ).fetchone()
            if row is not None:
                existing = _same_campaign(_any_from_row(row), built["config_id"], metadata)
                if not isinstance(existing, StoredDapCampaign):
                    raise CampaignConflict(f"campaign {existing.name!r} exists, not DAP")
                return existing, False
            conn.execute(
                "INSERT INTO campaigns (name, config_id, dap, local, domain, policy, created, "
                "metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    built["name"],
                    built["config_id"],
                    canonical_json(built["dap"]),
                    text(built["local"]),
                    text(built["domain"]),
                    text(built["policy"]),
                    _now(),
                    text(metadata or None),
                ],
            )
        created = self.get_any_campaign(built["name"])
        assert isinstance(created, StoredDapCampaign)
        return created, True

    def get_campaign(self, name: str) -> StoredCampaign:
        """The campaign called ``name``, one that takes reports here; :class:`CampaignNotFound`
        (a LookupError) if absent, :class:`SecureAggregationCampaign` (one too) for a DAP one."""
        campaign = self.get_any_campaign(name)
        if isinstance(campaign, StoredDapCampaign):
            raise SecureAggregationCampaign(name, campaign.leader, campaign.task_id)
        return campaign

    def get_any_campaign(self, name: str) -> AnyStoredCampaign:
        """The campaign called ``name``, of either kind; :class:`CampaignNotFound` if absent."""
        row = self.db.execute(f"{_CAMPAIGN_SELECT} WHERE campaigns.name = ?", [name]).fetchone()
        if row is None:
            raise CampaignNotFound(name)
        return _any_from_row(row)

    def close_campaign(self, name: str) -> tuple[str, bool]:
        """Close a campaign to new reports; return when it closed and whether it was open."""
        with self._write() as conn:
            campaign_id = self._campaign_id(name)
            changed = conn.execute(
                "INSERT OR IGNORE INTO closed_campaigns (campaign_id, closed) VALUES (?, ?)",
                [campaign_id, _now()],
            ).rowcount
            row = conn.execute(
                "SELECT closed FROM closed_campaigns WHERE campaign_id = ?", [campaign_id]
            ).fetchone()
        return str(row[0]), bool(changed)

    def delete_campaign(self, name: str, *, with_reports: bool = False) -> int:
        """Delete a campaign with everything stored for it (its reports, counters, shuffler
        batches, closed mark); return how many reports went with it. Refused with
        :class:`CampaignNotEmpty` while it has reports, unless ``with_reports``."""
        with self._write() as conn:
            campaign_id = self._campaign_id(name)
            row = conn.execute(
                "SELECT count(*) FROM reports WHERE campaign_id = ?", [campaign_id]
            ).fetchone()
            reports = int(row[0])
            if reports and not with_reports:
                raise CampaignNotEmpty(name, reports)
            for table in ("reports", "counters", "batch_parts", "batches", "closed_campaigns"):
                conn.execute(f"DELETE FROM {table} WHERE campaign_id = ?", [campaign_id])
            conn.execute("DELETE FROM campaigns WHERE id = ?", [campaign_id])
        return reports

    def apply_retention(self, today: datetime.date) -> dict[str, int]:
        """Delete the raw reports of each campaign with ``retention_days`` that arrived on a UTC
        day at least ``retention_days`` before ``today``; return campaign -> reports deleted.

        Kept: the campaign, its counters (accepted, duplicate, rejected: every report ever
        acknowledged, so the metrics stay exact) and its shuffler batches (the central
        guarantee's sizes). Estimates are computed from the stored reports, so after a cleanup
        they cover the retained window only (docs/campaigns.md). Each deletion adds to the
        campaign's :data:`RETENTION_COUNTER` in the same transaction.
        """
        deleted: dict[str, int] = {}
        for campaign in self.list_campaigns():
            days = campaign.metadata.get("retention_days")
            if days is None:
                continue
            oldest_kept = (today - datetime.timedelta(days=int(days) - 1)).isoformat()
            with self._write() as conn:
                campaign_id = self._campaign_id(campaign.name)
                count = conn.execute(
                    "DELETE FROM reports WHERE campaign_id = ? AND day < ?",
                    [campaign_id, oldest_kept],
                ).rowcount
                if count:
                    conn.execute(
                        "INSERT INTO counters (campaign_id, name, label, value) "
                        "VALUES (?, ?, '', ?) ON CONFLICT (campaign_id, name, label) "
                        "DO UPDATE SET value = value + ?",
                        [campaign_id, RETENTION_COUNTER, count, count],
                    )
            deleted[campaign.name] = count
        return deleted

    def take_lease(self, name: str, holder: str, *, now: float, ttl: float) -> bool:
        """Take the lease ``name`` for ``holder`` until ``now + ttl`` (epoch seconds) if its task
        is due (``next_due <= now``) and nobody holds it (or the holder's lease expired: a
        crashed worker); True when taken. One ``BEGIN IMMEDIATE`` transaction, so of several
        processes asking at once exactly one gets it."""
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO leases (name) VALUES (?)", [name])
            taken = conn.execute(
                "UPDATE leases SET holder = ?, held_until = ? WHERE name = ? AND next_due <= ? "
                "AND (holder IS NULL OR held_until <= ?)",
                [holder, now + ttl, name, now, now],
            ).rowcount
        return bool(taken)

    def finish_lease(self, name: str, holder: str, *, next_due: float) -> bool:
        """Release ``holder``'s lease ``name`` and set when its task is next due; False when
        ``holder`` no longer held it (it expired and another took it)."""
        with self._write() as conn:
            released = conn.execute(
                "UPDATE leases SET holder = NULL, held_until = 0, next_due = ? "
                "WHERE name = ? AND holder = ?",
                [next_due, name, holder],
            ).rowcount
        return bool(released)

    def renew_lease(self, name: str, holder: str, *, now: float, ttl: float) -> bool:
        """Extend ``holder``'s lease ``name`` to ``now + ttl`` (a long task, between its
        steps); False when ``holder`` no longer held it."""
        with self._write() as conn:
            renewed = conn.execute(
                "UPDATE leases SET held_until = ? WHERE name = ? AND holder = ?",
                [now + ttl, name, holder],
            ).rowcount
        return bool(renewed)

    def list_campaigns(self) -> list[StoredCampaign]:
        """The campaigns that take reports here (secure-aggregation ones left out), by name."""
        rows = self.db.execute(
            f"{_CAMPAIGN_SELECT} WHERE campaigns.dap IS NULL ORDER BY campaigns.name"
        )
        return [_campaign_from_row(row) for row in rows.fetchall()]

    def list_all_campaigns(self) -> list[AnyStoredCampaign]:
        """Every campaign, of either kind, by name."""
        rows = self.db.execute(f"{_CAMPAIGN_SELECT} ORDER BY campaigns.name")
        return [_any_from_row(row) for row in rows.fetchall()]

    def _campaign_id(self, campaign: str | StoredCampaign) -> int:
        """The row id of ``campaign`` (a name, or a :class:`StoredCampaign` read from this
        database, whose id is taken as read)."""
        if isinstance(campaign, StoredCampaign):
            if campaign.id is not None:
                return campaign.id
            campaign = campaign.name
        name = campaign
        row = self.db.conn.execute("SELECT id FROM campaigns WHERE name = ?", [name]).fetchone()
        if row is None:
            raise CampaignNotFound(name)
        return int(row[0])

    # -- reports

    def insert_reports(
        self,
        campaign: str | StoredCampaign,
        reports: Sequence[tuple[str, str]],
        *,
        rejected: Mapping[str, int] | None = None,
        day: str | None = None,
    ) -> InsertResult:
        """Store validated reports ``(report_id, payload_json)`` in one transaction.

        A report id already stored for the campaign (or repeated within ``reports``) is not
        stored again: the first copy wins and the rest count as duplicates. ``rejected`` (reason
        code -> count) is added to the metrics counters in the same transaction. ``day`` is the
        UTC day bucket (``YYYY-MM-DD``; today by default). ``campaign``: its name, or the
        :class:`StoredCampaign` just read (no second lookup).
        """
        for report_id, payload in reports:
            if not is_report_id(report_id) or not isinstance(payload, str):
                raise ValueError(
                    f"reports must be (32 lowercase hex id, JSON text) pairs; got {report_id!r}"
                )
        with self._write() as conn:
            return self._insert(conn, self._campaign_id(campaign), reports, rejected, day)

    def _insert(
        self,
        conn: sqlite3.Connection,
        campaign_id: int,
        reports: Sequence[tuple[str, str]],
        rejected: Mapping[str, int] | None,
        day: str | None,
        nonces: Sequence[bytes] | None = None,
    ) -> InsertResult:
        bucket = day if day is not None else _today()
        before = conn.total_changes
        # executemany with INSERT OR IGNORE: the ignored rows are the duplicates (a report id or
        # a nonce already stored), counted through total_changes (sqlite-utils' insert_all does
        # not report them).
        if nonces is None:
            conn.executemany(
                "INSERT OR IGNORE INTO reports (campaign_id, report_id, payload, day) "
                "VALUES (?, ?, ?, ?)",
                [(campaign_id, report_id, payload, bucket) for report_id, payload in reports],
            )
        else:
            conn.executemany(
                "INSERT OR IGNORE INTO reports (campaign_id, report_id, payload, day, nonce) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (campaign_id, report_id, payload, bucket, nonce)
                    for (report_id, payload), nonce in zip(reports, nonces, strict=True)
                ],
            )
        accepted = conn.total_changes - before
        duplicate = len(reports) - accepted
        increments = [("accepted", "", accepted), ("duplicate", "", duplicate)]
        increments += [("rejected", code, count) for code, count in (rejected or {}).items()]
        conn.executemany(
            "INSERT INTO counters (campaign_id, name, label, value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (campaign_id, name, label) "
            "DO UPDATE SET value = value + excluded.value",
            [(campaign_id, n, label, v) for n, label, v in increments if v],
        )
        return InsertResult(accepted=accepted, duplicate=duplicate)

    def insert_batch(
        self,
        campaign: str | StoredCampaign,
        batch_id: str,
        reports: Sequence[tuple[str, str]],
        *,
        size: int,
        rejections: Sequence[Mapping[str, Any]] = (),
        rejected: Mapping[str, int] | None = None,
        credentials: tuple[int, int] | None = None,
        part: tuple[int, int, int] | None = None,
        nonces: Sequence[bytes] | None = None,
    ) -> tuple[InsertResult, list[dict[str, Any]], bool]:
        """Store a shuffler batch once: ``(result, rejections, replayed)``.

        A batch id already stored answers what was stored the first time (``replayed``) and
        stores nothing: a shuffler retrying after a lost acknowledgment never duplicates. The
        batch's ``size`` (its valid reports) is kept for the central guarantee, less the reports
        already stored (a device's retry the shuffler forwarded again, or an envelope replayed
        under another id: ``nonces``, one per report, are stored once per campaign): they are
        no new users. ``credentials``: the shuffler's ``(per_credential, uncredentialed)`` for
        the batch, if it metered credentials (``shuffler.credentials``).

        ``part``: ``(start, count, total)`` when this request carries reports ``start`` to
        ``start + count`` of a batch of ``total`` (a batch too large for one request). Each part
        is stored once (by its range) and the batch keeps one row: its size is the sum over its
        parts, so it counts as one batch of its full size once every part arrived.
        """
        for report_id, payload in reports:
            if not is_report_id(report_id) or not isinstance(payload, str):
                raise ValueError(
                    f"reports must be (32 lowercase hex id, JSON text) pairs; got {report_id!r}"
                )
        with self._write() as conn:
            campaign_id = self._campaign_id(campaign)
            if part is not None:
                return self._insert_part(
                    conn,
                    campaign_id,
                    batch_id,
                    reports,
                    part,
                    size=size,
                    rejections=rejections,
                    rejected=rejected,
                    credentials=credentials,
                    nonces=nonces,
                )
            row = conn.execute(
                "SELECT accepted, duplicate, rejected, total FROM batches "
                "WHERE campaign_id = ? AND batch_id = ?",
                [campaign_id, batch_id],
            ).fetchone()
            if row is not None and row[3] is not None:
                raise ValueError(
                    f"batch {batch_id} was sent in parts: send its other reports as parts too"
                )
            if row is not None:
                stored = InsertResult(accepted=int(row[0]), duplicate=int(row[1]))
                return stored, json.loads(row[2]), True
            result = self._insert(conn, campaign_id, reports, rejected, None, nonces)
            conn.execute(
                "INSERT INTO batches (campaign_id, batch_id, size, accepted, duplicate, "
                "rejected, day, per_credential, uncredentialed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    campaign_id,
                    batch_id,
                    min(size, result.accepted),
                    result.accepted,
                    result.duplicate,
                    canonical_json(list(rejections)),
                    _today(),
                    *(credentials or (None, None)),
                ],
            )
        return result, [dict(r) for r in rejections], False

    def _insert_part(
        self,
        conn: sqlite3.Connection,
        campaign_id: int,
        batch_id: str,
        reports: Sequence[tuple[str, str]],
        part: tuple[int, int, int],
        *,
        size: int,
        rejections: Sequence[Mapping[str, Any]],
        rejected: Mapping[str, int] | None,
        credentials: tuple[int, int] | None,
        nonces: Sequence[bytes] | None,
    ) -> tuple[InsertResult, list[dict[str, Any]], bool]:
        start, count, total = part
        row = conn.execute(
            "SELECT accepted, duplicate, rejected FROM batch_parts "
            "WHERE campaign_id = ? AND batch_id = ? AND start = ? AND count = ?",
            [campaign_id, batch_id, start, count],
        ).fetchone()
        if row is not None:
            stored = InsertResult(accepted=int(row[0]), duplicate=int(row[1]))
            return stored, json.loads(row[2]), True
        known = conn.execute(
            "SELECT total FROM batches WHERE campaign_id = ? AND batch_id = ?",
            [campaign_id, batch_id],
        ).fetchone()
        if known is not None and known[0] != total:
            raise ValueError(
                f"part.total is {total}, but batch {batch_id} was {known[0]} reports "
                "in its earlier parts"
            )
        result = self._insert(conn, campaign_id, reports, rejected, None, nonces)
        answered = canonical_json(list(rejections))
        conn.execute(
            "INSERT INTO batch_parts (campaign_id, batch_id, start, count, accepted, duplicate, "
            "rejected) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [campaign_id, batch_id, start, count, result.accepted, result.duplicate, answered],
        )
        conn.execute(
            "INSERT INTO batches (campaign_id, batch_id, size, accepted, duplicate, rejected, "
            "day, total, per_credential, uncredentialed) VALUES (?, ?, ?, ?, ?, '[]', ?, ?, ?, ?) "
            "ON CONFLICT (campaign_id, batch_id) "
            "DO UPDATE SET size = size + excluded.size, accepted = accepted + excluded.accepted, "
            "duplicate = duplicate + excluded.duplicate",
            [
                campaign_id,
                batch_id,
                min(size, result.accepted),
                result.accepted,
                result.duplicate,
                _today(),
                total,
                *(credentials or (None, None)),
            ],
        )
        return result, [dict(r) for r in rejections], False

    def batch_sizes(self, campaign: str) -> list[int]:
        """The sizes of the shuffler batches received for ``campaign``, in batch id order."""
        campaign_id = self._campaign_id(campaign)
        rows = self.db.conn.execute(
            "SELECT size FROM batches WHERE campaign_id = ? ORDER BY batch_id", [campaign_id]
        ).fetchall()
        return [int(row[0]) for row in rows]

    def batch_credentials(self, campaign: str) -> list[tuple[int, int | None, int | None]]:
        """``(size, per_credential, uncredentialed)`` of each shuffler batch received for
        ``campaign`` (the last two ``None`` when the shuffler took uploads without
        credentials), in batch id order."""
        campaign_id = self._campaign_id(campaign)
        rows = self.db.conn.execute(
            "SELECT size, per_credential, uncredentialed FROM batches WHERE campaign_id = ? "
            "ORDER BY batch_id",
            [campaign_id],
        ).fetchall()
        return [
            (int(a), None if b is None else int(b), None if c is None else int(c))
            for a, b, c in rows
        ]

    # -- key pairs (collector.keys)

    def add_key(self, key_id: str, public_key: str, private_key: str) -> None:
        """Store a new key pair and make it the only active one (older ones still open)."""
        with self._write() as conn:
            conn.execute("UPDATE keys SET active = 0")
            conn.execute(
                "INSERT INTO keys (key_id, public_key, private_key, created, active) "
                "VALUES (?, ?, ?, ?, 1)",
                [key_id, public_key, private_key, _now()],
            )

    def list_keys(self) -> list[tuple[str, str, str, bool]]:
        """``(key_id, public_key, created, active)`` of every key pair, oldest first."""
        rows = self.db.conn.execute(
            "SELECT key_id, public_key, created, active FROM keys ORDER BY created, key_id"
        ).fetchall()
        return [(str(a), str(b), str(c), bool(d)) for a, b, c, d in rows]

    def private_keys(self) -> dict[str, str]:
        """key id -> private key (base64url) of every key pair, retired ones included."""
        rows = self.db.conn.execute("SELECT key_id, private_key FROM keys").fetchall()
        return {str(a): str(b) for a, b in rows}

    def count_reports(
        self, campaign: str, *, since: str | None = None, until: str | None = None
    ) -> int:
        """Stored reports of the campaign; ``since``/``until``: only those UTC days (inclusive)."""
        campaign_id = self._campaign_id(campaign)
        if since is None and until is None:
            row = self.db.conn.execute(
                "SELECT count(*) FROM reports WHERE campaign_id = ?", [campaign_id]
            ).fetchone()
        else:
            row = self.db.conn.execute(
                "SELECT count(*) FROM reports WHERE campaign_id = ? AND day >= ? AND day <= ?",
                [campaign_id, since or _LOW_DAY, until or _HIGH_DAY],
            ).fetchone()
        return int(row[0])

    def report_days(
        self, campaign: str, *, since: str | None = None, until: str | None = None
    ) -> list[tuple[str, int]]:
        """``(day, stored reports)`` for each UTC day with reports, in order."""
        campaign_id = self._campaign_id(campaign)
        rows = self.db.conn.execute(
            "SELECT day, count(*) FROM reports WHERE campaign_id = ? AND day >= ? AND day <= ? "
            "GROUP BY day ORDER BY day",
            [campaign_id, since or _LOW_DAY, until or _HIGH_DAY],
        ).fetchall()
        return [(str(day), int(count)) for day, count in rows]

    def iter_payload_chunks(
        self,
        campaign: str,
        *,
        chunk_size: int = 50_000,
        after: int = 0,
        upto: int | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[list[tuple[int, str, str]]]:
        """Stored rows ``(seq, report_id, payload_json)`` in insertion order, chunk by chunk.

        Each chunk is its own short query (keyset pagination on ``seq``), so no read transaction
        is held open between chunks and memory stays O(chunk). ``since``/``until`` keep the
        reports of those UTC days (``YYYY-MM-DD``, inclusive; the caller checks the format).
        """
        check_int(chunk_size, "chunk_size", minimum=1)
        campaign_id = self._campaign_id(campaign)
        last = after
        limit = math.inf if upto is None else upto
        window = "" if since is None and until is None else " AND day >= ? AND day <= ?"
        days = [] if not window else [since or _LOW_DAY, until or _HIGH_DAY]
        while last < limit:
            rows = self.db.conn.execute(
                "SELECT seq, report_id, payload FROM reports "
                f"WHERE campaign_id = ? AND seq > ? AND seq <= ?{window} ORDER BY seq LIMIT ?",
                [campaign_id, last, _MAX_SQLITE_INT if upto is None else upto, *days, chunk_size],
            ).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def iter_report_chunks(
        self,
        campaign: str,
        *,
        chunk_size: int = 50_000,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[Reports]:
        """Stored reports, decoded with the campaign mechanism's ``from_wire``, chunk by chunk
        (``since``/``until``: only those UTC days, inclusive)."""
        mechanism = self.get_campaign(campaign).mechanism
        for rows in self.iter_payload_chunks(
            campaign, chunk_size=chunk_size, since=since, until=until
        ):
            yield decode_rows(mechanism, campaign, rows)

    def export_page(self, campaign: str, *, after: int = 0, limit: int = 10_000) -> ExportPage:
        """Cut a page of at most ``limit`` stored reports after the cursor ``after``.

        The page's extent is fixed here, so its cursor is known before its rows stream.
        """
        check_int(limit, "limit", minimum=1)
        campaign_id = self._campaign_id(campaign)
        conn = self.db.conn
        row = conn.execute(
            "SELECT seq FROM reports WHERE campaign_id = ? AND seq > ? "
            "ORDER BY seq LIMIT 1 OFFSET ?",
            [campaign_id, after, limit - 1],
        ).fetchone()
        if row is None:
            top = conn.execute(
                "SELECT max(seq) FROM reports WHERE campaign_id = ? AND seq > ?",
                [campaign_id, after],
            ).fetchone()
            upto = int(top[0]) if top[0] is not None else after
            has_more = False
        else:
            upto = int(row[0])
            has_more = (
                conn.execute(
                    "SELECT 1 FROM reports WHERE campaign_id = ? AND seq > ? LIMIT 1",
                    [campaign_id, upto],
                ).fetchone()
                is not None
            )
        return ExportPage(campaign=campaign, after=after, cursor=upto, has_more=has_more)

    def export_rows(
        self, page: ExportPage, *, chunk_size: int = 5_000
    ) -> Iterator[list[tuple[str, str]]]:
        """The page's rows ``(report_id, payload_json)``, in chunks, in storage order."""
        for chunk in self.iter_payload_chunks(
            page.campaign, chunk_size=chunk_size, after=page.after, upto=page.cursor
        ):
            yield [(report_id, payload) for _, report_id, payload in chunk]

    # -- metrics

    def counters(self) -> list[tuple[str, str, str, int]]:
        """All counters as ``(campaign, name, label, value)``, sorted."""
        rows = self.db.conn.execute(
            "SELECT c.name, k.name, k.label, k.value FROM counters k "
            "JOIN campaigns c ON c.id = k.campaign_id ORDER BY c.name, k.name, k.label"
        ).fetchall()
        return [(str(a), str(b), str(c), int(d)) for a, b, c, d in rows]

    def report_counts(self) -> dict[str, int]:
        """Stored reports per campaign."""
        rows = self.db.conn.execute(
            "SELECT c.name, count(r.seq) FROM campaigns c "
            "LEFT JOIN reports r ON r.campaign_id = c.id GROUP BY c.id ORDER BY c.name"
        ).fetchall()
        return {str(name): int(count) for name, count in rows}


_MAX_SQLITE_INT = (1 << 63) - 1
RETENTION_COUNTER = "retention_deleted"
"""The ``counters`` row of the reports the retention cleanup deleted, per campaign."""
_LOW_DAY, _HIGH_DAY = "0000-00-00", "9999-99-99"  # bounds of an open day window
_CAMPAIGN_SELECT = (
    "SELECT campaigns.name, config_id, mechanism, domain, policy, min_batch_size, created, "
    "shuffle, metadata, campaigns.id, closed_campaigns.closed, dap, local FROM campaigns "
    "LEFT JOIN closed_campaigns ON closed_campaigns.campaign_id = campaigns.id"
)
"""A campaign's row with its id and closing time: one read answers everything an upload asks."""


_BATCH_BODY = '{"batch_id":"","config_id":"","reports":[]}'
_BATCH_REPORT = '{"id":"","payload":},'


def shuffled_batch_bytes(reports: int, envelope_bytes: int, config_id: str) -> int:
    """The body of a shuffler batch of ``reports`` envelopes of ``envelope_bytes`` each (the
    compact JSON ``shuffler.storage`` writes): the batch's and the reports' ids around them."""
    per_report = len(_BATCH_REPORT) + 32 + envelope_bytes
    return len(_BATCH_BODY) + 32 + len(json.dumps(config_id)) - 2 + reports * per_report - 1


def check_batch_fits(campaign: Mapping[str, Any], max_body: int) -> None:
    """``ValueError`` naming ``shuffle.min_batch`` and the numbers when a batch of
    ``min_batch`` sealed reports of ``campaign`` (a normalized document with its ``config_id``)
    is larger than ``max_body`` bytes: the smallest batch the collector may take could never
    travel in one request. Mechanisms that do not bound their payloads are not checked."""
    from client_sdk.sealing import envelope_size

    try:
        envelope = envelope_size(campaign)
    except NotImplementedError:
        return
    min_batch = int(campaign["shuffle"]["min_batch"])
    config_id = str(campaign["config_id"])
    needed = shuffled_batch_bytes(min_batch, envelope, config_id)
    if needed > max_body:
        empty = shuffled_batch_bytes(0, envelope, config_id)
        fits = max(0, (max_body - empty) // (shuffled_batch_bytes(1, envelope, config_id) - empty))
        raise ValueError(
            f"shuffle.min_batch {min_batch}: a batch of {min_batch} sealed reports of "
            f"{envelope} bytes each is a request of {needed} bytes, over the collector's body "
            f"limit of {max_body} bytes (LDP_MAX_CONTENT_LENGTH); at most {fits} such reports "
            "fit in one request: lower min_batch (or the mechanism's size) or raise the limit"
        )


def decode_rows(mechanism: Mechanism, campaign: str, rows: Sequence[Sequence[Any]]) -> Reports:
    """Stored rows ``(seq, report_id, payload_json, ...)`` decoded with ``mechanism.from_wire``.

    A ``ValueError`` names the campaign and the rows' ``seq`` range.
    """
    # One json.loads over the whole chunk instead of one per payload.
    payloads = json.loads("[" + ",".join(row[2] for row in rows) + "]")
    try:
        return mechanism.from_wire(payloads)
    except ValueError as error:
        raise ValueError(
            f"campaign {campaign!r}: stored reports {rows[0][0]}..{rows[-1][0]} do not decode: "
            f"{error}"
        ) from error


def _same_campaign(
    existing: AnyStoredCampaign, config_id: str, metadata: Mapping[str, Any]
) -> AnyStoredCampaign:
    """``existing`` if it has this content and metadata; :class:`CampaignConflict` otherwise."""
    if existing.config_id != config_id:
        raise CampaignConflict(
            f"campaign {existing.name!r} exists with config_id {existing.config_id}; "
            f"campaigns are immutable (this body has config_id {config_id})"
        )
    if existing.metadata != metadata:
        raise CampaignConflict(
            f"campaign {existing.name!r} exists with other metadata "
            f"{canonical_json(existing.metadata)}; campaigns are immutable"
        )
    return existing


def _any_from_row(row: Sequence[Any]) -> AnyStoredCampaign:
    if row[11] is None:
        return _campaign_from_row(row)
    name, content_id, _, domain_json, policy_json, _, created = row[:7]
    _, metadata_json, row_id, closed, dap_json, local_json = row[7:13]
    return StoredDapCampaign(
        name=name,
        dap=json.loads(dap_json),
        local=None if local_json is None else json.loads(local_json),
        domain=None if domain_json is None else json.loads(domain_json),
        policy=None if policy_json is None else json.loads(policy_json),
        config_id=content_id,
        created=created,
        id=int(row_id),
        closed_at=None if closed is None else str(closed),
        metadata={} if metadata_json is None else json.loads(metadata_json),
    )


def _campaign_from_row(row: Sequence[Any]) -> StoredCampaign:
    name, content_id, mechanism_json, domain_json, policy_json, min_batch_size, created = row[:7]
    shuffle_json, metadata_json, row_id, closed = row[7:11]
    mechanism = _mechanism_for(mechanism_json)
    return StoredCampaign(
        name=name,
        mechanism=mechanism,
        config=json.loads(mechanism_json),
        domain=None if domain_json is None else json.loads(domain_json),
        policy=None if policy_json is None else json.loads(policy_json),
        config_id=content_id,
        min_batch_size=int(min_batch_size),
        created=created,
        shuffle=None if shuffle_json is None else json.loads(shuffle_json),
        id=int(row_id),
        closed_at=None if closed is None else str(closed),
        metadata={} if metadata_json is None else json.loads(metadata_json),
    )


def _translate(error: sqlite3.OperationalError) -> Exception:
    message = str(error).lower()
    if "locked" in message or "busy" in message:
        return StorageBusy(f"database is busy: {error}")
    return error


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_today() -> datetime.date:
    """The UTC date expiry goes by: ``LDP_TODAY`` (YYYY-MM-DD, for drills) or the real one."""
    override = os.environ.get("LDP_TODAY")
    if override:
        try:
            return datetime.date.fromisoformat(override)
        except ValueError:
            raise ValueError(f"LDP_TODAY must be a date YYYY-MM-DD; got {override!r}") from None
    return datetime.datetime.now(datetime.timezone.utc).date()


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
