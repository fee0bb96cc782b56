"""The on-device privacy budget: a ledger per campaign, checked before anything is sent.

The server cannot enforce a device's privacy budget (it only sees what the device chose to send),
so the device does, with a small SQLite ledger in its ``state_dir`` (WAL, ``synchronous=FULL``:
``client_sdk.sqlite``).

Policy. A campaign carries its budget policy, a JSON object (its shape, :class:`BudgetPolicy`, is
part of the campaign protocol: ``client_sdk.campaign``, which the collector validates with)::

    {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": 86400}

Periods are aligned on the Unix epoch: period i covers [i * period_seconds, (i+1) *
period_seconds). Within one period a campaign may spend at most ``reports_per_period`` charges
and at most ``epsilon_per_report * reports_per_period`` epsilon in total. A charge is:

* for an ordinary report, its epsilon, which must itself be at most ``epsilon_per_report``;
* for a memoized mechanism (``memo_key`` given), epsilon_inf for the first report of each
  distinct memoized value, and nothing for any later report of it, in any period: unlimited
  reports of one value reveal at most epsilon_inf (Erlingsson et al., CCS 2014;
  docs/math/memoization.md).
  epsilon_inf may exceed ``epsilon_per_report`` (it covers every future report of the value) but
  not the period's total.

``authorize`` checks and records in one transaction (``BEGIN IMMEDIATE``, so two threads or two
processes cannot both pass the check): either the spend is recorded and a :class:`Receipt` is
returned, or :class:`BudgetExceededError` is raised and nothing at all is written.
``authorize_many`` does the same for a batch of reports, all or nothing.

Clock. Time only moves forward in the ledger: it stores the latest time it has seen, and a clock
reading before it counts as that time. A clock set back therefore never renews a period early
(the budget stays spent until real time passes the stored time). A clock set forward renews at
most the periods it skips, and then holds every later reading back to that time.

Log. :meth:`BudgetLedger.history` is the user-visible record of what was sent: per report the
campaign, the hour it was authorized in (UTC), the epsilon charged, whether it was a memoized
repeat, and the randomized payload, if the caller passed it. Raw values are never given to the
ledger; memo keys (HMACs under the device secret) are kept in a separate table and never shown.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from client_sdk.campaign import BudgetPolicy
from client_sdk.ledger_mac_chain import HEAD_FILE, LedgerHead, LedgerMacChain
from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.sqlite import connect, immediate
from client_sdk.state import create_private_file

__all__ = [
    "LEDGER_FILE",
    "BudgetExceededError",
    "BudgetLedger",
    "BudgetPolicy",
    "BudgetStatus",
    "Charge",
    "LogEntry",
    "Receipt",
]

LEDGER_FILE = "privacy_ledger.sqlite3"
SCHEMA_VERSION = 2
RELATIVE_TOLERANCE = 1e-9
"""Float slack when summing epsilons (ten reports of 0.1 fit a budget of 1.0)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    campaign TEXT NOT NULL,
    at REAL NOT NULL,
    epsilon REAL NOT NULL,
    charged INTEGER NOT NULL,
    memoized INTEGER NOT NULL,
    report TEXT,
    memo_key TEXT,
    event TEXT,
    mac TEXT
);
CREATE INDEX IF NOT EXISTS spends_by_campaign ON spends (campaign, at);
CREATE TABLE IF NOT EXISTS memo_keys (
    campaign TEXT NOT NULL,
    memo_key TEXT NOT NULL,
    epsilon REAL NOT NULL,
    PRIMARY KEY (campaign, memo_key)
);
"""


class BudgetExceededError(ValueError):
    """A report the campaign's policy does not allow now; nothing was recorded.

    ``renews_at`` is the Unix time at which the current period ends (``None`` when waiting
    cannot help: the report costs more than the policy allows in any period).
    """

    def __init__(
        self,
        campaign: str,
        *,
        reason: str,
        spent: float,
        limit: float,
        renews_at: float | None,
    ) -> None:
        when = (
            f"the period renews at {_iso(renews_at)}"
            if renews_at is not None
            else "waiting for a new period does not help"
        )
        super().__init__(
            f"privacy budget of campaign {campaign!r} exceeded: {reason} "
            f"(spent {spent:.6g} of {limit:.6g} epsilon this period; {when})"
        )
        self.campaign = campaign
        self.reason = reason
        self.spent = spent
        self.limit = limit
        self.renews_at = renews_at


@dataclasses.dataclass(frozen=True)
class Charge:
    """One report to authorize: its epsilon (epsilon_inf when memoized), the memo key of a
    memoized value (an HMAC, never the value), and the randomized payload for the log."""

    epsilon: float
    memo_key: str | None = None
    report: Any = None


@dataclasses.dataclass(frozen=True)
class Receipt:
    """What ``authorize`` recorded."""

    entry_id: int
    campaign: str
    epsilon_charged: float
    memoized_repeat: bool
    spent_in_period: float
    limit_per_period: float
    charges_in_period: int
    period_start: float
    renews_at: float


@dataclasses.dataclass(frozen=True)
class BudgetStatus:
    """A campaign's standing under a policy, at the ledger's current time."""

    campaign: str
    spent_in_period: float
    limit_per_period: float
    charges_in_period: int
    charges_per_period: int
    period_start: float
    renews_at: float
    lifetime_epsilon: float
    distinct_memoized_values: int


@dataclasses.dataclass(frozen=True)
class LogEntry:
    """One line of the user-visible log: what was sent and what it cost."""

    entry_id: int
    campaign: str
    hour: str
    epsilon_charged: float
    memoized_repeat: bool
    report: Any
    event: str | None = None
    """A note instead of a report (a campaign that changed, a damaged ledger...)."""


class BudgetLedger:
    """The privacy ledger of one device, stored in ``state_dir/privacy_ledger.sqlite3``.

    Thread-safe (one connection behind a lock) and safe across processes (immediate
    transactions). ``clock`` returns Unix seconds (tests inject one).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        seal: LedgerMacChain | None = None,
        expect_existing: bool = False,
    ) -> None:
        """Open (or create) the ledger of ``state_dir``.

        :param seal: the device's :class:`~client_sdk.ledger_mac_chain.LedgerMacChain`; a
            sealed ledger is verified on opening and locks the device out when it is damaged
            (``client_sdk.ledger_mac_chain``). ``None`` opens an unsealed ledger (tools and
            tests).
        :param expect_existing: the device secret existed before this client started, so a
            ledger must exist too; its absence is damage, not a new device.
        """
        directory = Path(state_dir)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / LEDGER_FILE
        self._directory = directory
        self._clock = clock
        self._lock = threading.Lock()
        self._seal = seal
        self.damage: str | None = None
        """Why the ledger was found damaged on opening (``None``: it was not)."""
        if seal is not None:
            self.damage = self._inspect(seal, expect_existing)
            if self.damage is not None:
                self._move_aside()
        if not self.path.exists():
            create_private_file(self.path)
        self._connection = connect(self.path, timeout=30.0, synchronous="FULL", foreign_keys=True)
        with self._lock, immediate(self._connection):
            self._create_schema()
            if seal is not None:
                self._adopt_legacy_rows(seal)
                if self.damage is not None:
                    self._set_meta("lockout_since", repr(float(self._clock())))
                    self._set_meta("lockout_reason", self.damage)
                self._store_head(seal)
        if seal is not None:
            seal.write_head_file(directory, self._head())

    def _create_schema(self) -> None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self._connection.execute(statement)
        columns = {row[1] for row in self._connection.execute("PRAGMA table_info(spends)")}
        for column in ("memo_key", "event", "mac"):  # ledgers of schema 1
            if column not in columns:
                self._connection.execute(f"ALTER TABLE spends ADD COLUMN {column} TEXT")
        for key, value in (("schema_version", str(SCHEMA_VERSION)), ("last_seen", "0")):
            self._connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, value)
            )

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> BudgetLedger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- the check and the spend ---------------------------------------------------------------

    def authorize(
        self,
        campaign: str,
        policy: Mapping[str, Any] | BudgetPolicy,
        *,
        epsilon: float,
        memo_key: str | None = None,
        report: Any = None,
    ) -> Receipt:
        """Record one report's spend, or raise :class:`BudgetExceededError` and record nothing.

        ``epsilon`` is the report's epsilon for an ordinary mechanism, epsilon_inf for a
        memoized one (then ``memo_key`` names the memoized value: an HMAC, never the value).
        ``report`` is the randomized payload that will be sent (JSON-safe), kept in the log.
        """
        (receipt,) = self.authorize_many(
            campaign, policy, [Charge(epsilon=epsilon, memo_key=memo_key, report=report)]
        )
        return receipt

    def authorize_many(
        self,
        campaign: str,
        policy: Mapping[str, Any] | BudgetPolicy,
        charges: Sequence[Charge],
    ) -> list[Receipt]:
        """Several reports of one campaign, all or nothing, in order, in one transaction.

        Each is checked against the spends before it (including earlier ones of the batch: two
        reports of one new memoized value pay once). If any does not fit, nothing of the batch
        is recorded and :class:`BudgetExceededError` is raised.
        """
        name = _check_campaign(campaign)
        rules = BudgetPolicy.from_dict(policy)
        checked = [
            (
                check_epsilon(charge.epsilon),
                _check_memo_key(charge.memo_key),
                None if charge.report is None else _json(charge.report),
            )
            for charge in charges
        ]
        receipts: list[Receipt] = []
        with self._lock, immediate(self._connection):
            now = self._now()
            period_start, renews_at = _period(now, rules)
            spent, count = self._period_totals(name, period_start)
            self._check_lockout(name, rules, now, spent)
            for cost, key, payload in checked:
                repeat = key is not None and self._has_memo_key(name, key)
                if not repeat:
                    self._check_fits(name, rules, cost, key is not None, spent, count, renews_at)
                charged = 0.0 if repeat else cost
                new_key = key if key is not None and not repeat else None
                cursor = self._connection.execute(
                    "INSERT INTO spends (campaign, at, epsilon, charged, memoized, report, "
                    "memo_key) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, now, charged, int(not repeat), int(key is not None), payload, new_key),
                )
                if self._seal is not None:
                    self._chain_row(self._seal, int(cursor.lastrowid or 0))
                if key is not None and not repeat:
                    self._connection.execute(
                        "INSERT INTO memo_keys (campaign, memo_key, epsilon) VALUES (?, ?, ?)",
                        (name, key, cost),
                    )
                if not repeat:
                    spent = math.fsum((spent, charged))
                    count += 1
                entry_id = cursor.lastrowid
                assert entry_id is not None
                receipts.append(
                    Receipt(
                        entry_id=int(entry_id),
                        campaign=name,
                        epsilon_charged=charged,
                        memoized_repeat=repeat,
                        spent_in_period=spent,
                        limit_per_period=rules.epsilon_per_period,
                        charges_in_period=count,
                        period_start=period_start,
                        renews_at=renews_at,
                    )
                )
            self._set_last_seen(now)
            if self._seal is not None:
                self._store_head(self._seal)
        if self._seal is not None:
            self._seal.write_head_file(self._directory, self._head())
        return receipts

    def note(self, campaign: str, event: str) -> None:
        """Add a line to the user-visible log that is not a report (it costs nothing)."""
        name = _check_campaign(campaign)
        if not isinstance(event, str) or not event:
            raise ValueError("event must be a non-empty string")
        with self._lock, immediate(self._connection):
            now = self._now()
            cursor = self._connection.execute(
                "INSERT INTO spends (campaign, at, epsilon, charged, memoized, event) "
                "VALUES (?, ?, 0, 0, 0, ?)",
                (name, now, event),
            )
            if self._seal is not None:
                self._chain_row(self._seal, int(cursor.lastrowid or 0))
                self._store_head(self._seal)
        if self._seal is not None:
            self._seal.write_head_file(self._directory, self._head())

    def _check_lockout(self, campaign: str, rules: BudgetPolicy, now: float, spent: float) -> None:
        """Refuse every budgeted report until the period in which damage was found has ended."""
        since = self._get_meta("lockout_since")
        if since is None:
            return
        _, renews_at = _period(float(since), rules)
        if now < renews_at:
            raise BudgetExceededError(
                campaign,
                reason="the privacy ledger was found damaged "
                f"({self._get_meta('lockout_reason')}) on {_iso(float(since))}; this device "
                "sends no budgeted report until that period ends",
                spent=spent,
                limit=rules.epsilon_per_period,
                renews_at=renews_at,
            )

    def _check_fits(
        self,
        campaign: str,
        rules: BudgetPolicy,
        cost: float,
        memoized: bool,
        spent: float,
        charges: int,
        renews_at: float,
    ) -> None:
        limit = rules.epsilon_per_period
        slack = RELATIVE_TOLERANCE * limit
        if not memoized and cost > rules.epsilon_per_report * (1 + RELATIVE_TOLERANCE):
            raise BudgetExceededError(
                campaign,
                reason=f"a report of epsilon {cost:.6g} exceeds the policy's "
                f"epsilon_per_report {rules.epsilon_per_report:.6g}",
                spent=spent,
                limit=limit,
                renews_at=None,
            )
        if cost > limit + slack:
            raise BudgetExceededError(
                campaign,
                reason=f"a memoized value costs epsilon_inf {cost:.6g}, more than a whole period "
                f"allows",
                spent=spent,
                limit=limit,
                renews_at=None,
            )
        if charges + 1 > rules.reports_per_period:
            raise BudgetExceededError(
                campaign,
                reason=f"{charges} of {rules.reports_per_period} charged reports already sent "
                "this period",
                spent=spent,
                limit=limit,
                renews_at=renews_at,
            )
        if spent + cost > limit + slack:
            raise BudgetExceededError(
                campaign,
                reason=f"this report would cost {cost:.6g} more",
                spent=spent,
                limit=limit,
                renews_at=renews_at,
            )

    # ---- reading -------------------------------------------------------------------------------

    def status(self, campaign: str, policy: Mapping[str, Any] | BudgetPolicy) -> BudgetStatus:
        """Where ``campaign`` stands now (reads only; does not advance the stored time)."""
        name = _check_campaign(campaign)
        rules = BudgetPolicy.from_dict(policy)
        with self._lock:
            now = self._now()
            period_start, renews_at = _period(now, rules)
            spent, charges = self._period_totals(name, period_start)
            lifetime, distinct = self._connection.execute(
                "SELECT COALESCE(SUM(epsilon), 0), "
                "(SELECT COUNT(*) FROM memo_keys WHERE campaign = ?) "
                "FROM spends WHERE campaign = ?",
                (name, name),
            ).fetchone()
        return BudgetStatus(
            campaign=name,
            spent_in_period=spent,
            limit_per_period=rules.epsilon_per_period,
            charges_in_period=charges,
            charges_per_period=rules.reports_per_period,
            period_start=period_start,
            renews_at=renews_at,
            lifetime_epsilon=float(lifetime),
            distinct_memoized_values=int(distinct),
        )

    def history(self, campaign: str | None = None, *, limit: int | None = None) -> list[LogEntry]:
        """The log of what was authorized for sending, oldest first (``limit``: the latest)."""
        query = "SELECT id, campaign, at, epsilon, charged, memoized, report, event FROM spends"
        parameters: list[Any] = []
        if campaign is not None:
            query += " WHERE campaign = ?"
            parameters.append(_check_campaign(campaign))
        query += " ORDER BY id DESC"
        if limit is not None:
            query += " LIMIT ?"
            parameters.append(check_int(limit, "limit", minimum=1))
        with self._lock:
            rows = self._connection.execute(query, parameters).fetchall()
        return [
            LogEntry(
                entry_id=int(row[0]),
                campaign=row[1],
                hour=_iso(math.floor(row[2] / 3600) * 3600),
                epsilon_charged=float(row[3]),
                memoized_repeat=bool(row[5]) and not bool(row[4]),
                report=None if row[6] is None else json.loads(row[6]),
                event=row[7],
            )
            for row in reversed(rows)
        ]

    # ---- the seal (client_sdk.ledger_mac_chain) --------------------------------------------

    def _inspect(self, seal: LedgerMacChain, expect_existing: bool) -> str | None:
        """Why the ledger on disk cannot be trusted, or ``None`` (new device or verified)."""
        exists = self.path.exists()
        head_exists = (self._directory / HEAD_FILE).exists()
        if not exists and not head_exists:
            return "the ledger is missing" if expect_existing else None
        if not exists or self.path.stat().st_size == 0:
            return "the ledger is missing or empty"
        try:
            head = seal.read_head_file(self._directory)
        except ValueError as error:
            return str(error)
        try:
            connection = connect(self.path, timeout=30.0, synchronous="FULL", wal=False)
        except sqlite3.DatabaseError as error:
            return f"the ledger is unreadable ({error})"
        try:
            if head is None and _is_unsealed(connection):
                return None  # written before ledgers were sealed: adopted on opening
            return _verify(connection, seal, head)
        except sqlite3.DatabaseError as error:
            return f"the ledger is unreadable ({error})"
        finally:
            connection.close()

    def _move_aside(self) -> None:
        """Keep the damaged files for inspection, out of the way of the new ledger."""
        stamp = f"damaged-{int(time.time())}"
        for name in (LEDGER_FILE, f"{LEDGER_FILE}-wal", f"{LEDGER_FILE}-shm", HEAD_FILE):
            path = self._directory / name
            if path.exists():
                os.replace(path, self._directory / f"{name}.{stamp}")

    def _adopt_legacy_rows(self, seal: LedgerMacChain) -> None:
        """Seal the rows of a ledger written before sealing existed (schema 1)."""
        if self._get_meta("chain") is not None:
            return
        # Their memoized values cannot be tied to sealed rows: forget them, so each is charged
        # again (conservative) rather than trusted unsealed.
        self._connection.execute("DELETE FROM memo_keys")
        self._set_meta("chain", seal.genesis)
        self._set_meta("entries", "0")
        for (row_id,) in self._connection.execute("SELECT id FROM spends ORDER BY id").fetchall():
            self._chain_row(seal, int(row_id))

    def _chain_row(self, seal: LedgerMacChain, row_id: int) -> None:
        row = self._connection.execute(f"{_ROW_QUERY} WHERE id = ?", (row_id,)).fetchone()
        chain = seal.row(str(self._get_meta("chain")), row)
        self._connection.execute("UPDATE spends SET mac = ? WHERE id = ?", (chain, row_id))
        self._set_meta("chain", chain)
        self._set_meta("entries", str(int(self._get_meta("entries") or 0) + 1))

    def _head(self) -> LedgerHead:
        return _meta_head(self._connection)

    def _store_head(self, seal: LedgerMacChain) -> None:
        self._set_meta("seal", seal.head_tag(self._head()))

    def _get_meta(self, key: str) -> str | None:
        row = self._connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._connection.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # ---- internals -----------------------------------------------------------------------------

    def _now(self) -> float:
        """The clock, never before the latest time stored (time only moves forward here)."""
        reading = float(self._clock())
        if not math.isfinite(reading):
            raise ValueError(f"the clock returned {reading!r}")
        (stored,) = self._connection.execute(
            "SELECT value FROM meta WHERE key = 'last_seen'"
        ).fetchone()
        return max(reading, float(stored))

    def _set_last_seen(self, now: float) -> None:
        self._connection.execute(
            "UPDATE meta SET value = ? WHERE key = 'last_seen'", (repr(float(now)),)
        )

    def _period_totals(self, campaign: str, period_start: float) -> tuple[float, int]:
        values = self._connection.execute(
            "SELECT epsilon FROM spends WHERE campaign = ? AND at >= ? AND charged = 1",
            (campaign, period_start),
        ).fetchall()
        return math.fsum(v for (v,) in values), len(values)

    def _has_memo_key(self, campaign: str, key: str) -> bool:
        row = self._connection.execute(
            "SELECT 1 FROM memo_keys WHERE campaign = ? AND memo_key = ?", (campaign, key)
        ).fetchone()
        return row is not None


_ROW_QUERY = (
    "SELECT id, campaign, at, epsilon, charged, memoized, report, memo_key, event FROM spends"
)
_HEAD_KEYS = ("entries", "chain", "last_seen", "lockout_since", "lockout_reason")


def _meta_head(connection: sqlite3.Connection) -> LedgerHead:
    stored = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    return LedgerHead({key: stored.get(key) for key in _HEAD_KEYS})


def _is_unsealed(connection: sqlite3.Connection) -> bool:
    """A schema-1 ledger: spends without a ``mac`` column, no chain in ``meta``."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(spends)")}
    if not columns:
        return False
    chain = connection.execute("SELECT value FROM meta WHERE key = 'chain'").fetchone()
    return "mac" not in columns and chain is None


def _verify(
    connection: sqlite3.Connection, seal: LedgerMacChain, head: LedgerHead | None
) -> str | None:
    """Check a sealed ledger's chain, meta and head file (``client_sdk.ledger_mac_chain``)."""
    if head is None:
        return "the ledger's head file is missing"
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if not {"meta", "spends", "memo_keys"} <= tables:
        return "the ledger has lost its tables"
    meta = _meta_head(connection)
    stored = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    if meta["chain"] is None or not seal.verify_head(meta, stored.get("seal")):
        return "the ledger's own head fails verification"
    chain = seal.genesis
    entries = 0
    macs = [chain]
    memo_keys: set[tuple[str, str]] = set()
    for row in connection.execute(f"{_ROW_QUERY} ORDER BY id").fetchall():
        chain = seal.row(chain, row)
        (stored_mac,) = connection.execute(
            "SELECT mac FROM spends WHERE id = ?", (row[0],)
        ).fetchone()
        if stored_mac != chain:
            return f"spend row {row[0]} fails verification"
        entries += 1
        macs.append(chain)
        if row[7] is not None:
            memo_keys.add((row[1], row[7]))
    if entries != int(meta["entries"] or -1) or chain != meta["chain"]:
        return f"the ledger holds {entries} sealed rows, its head says {meta['entries']}"
    if set(connection.execute("SELECT campaign, memo_key FROM memo_keys").fetchall()) != memo_keys:
        return "the ledger's memoized values do not match its sealed rows"
    behind = int(head["entries"] or 0)
    if behind > entries or macs[behind] != head["chain"]:
        return (
            f"the ledger holds {entries} rows, fewer than the {behind} its head file recorded "
            "(rows or a write-ahead log were lost)"
        )
    if float(head["last_seen"] or 0) > float(meta["last_seen"] or 0):
        return "the ledger's clock is behind its head file"
    if head["lockout_since"] != meta["lockout_since"]:
        return "the ledger's lock-out does not match its head file"
    return None


def _period(now: float, rules: BudgetPolicy) -> tuple[float, float]:
    start = math.floor(now / rules.period_seconds) * rules.period_seconds
    return float(start), float(start + rules.period_seconds)


def _check_campaign(campaign: Any) -> str:
    if not isinstance(campaign, str) or not campaign:
        raise ValueError(f"campaign must be a non-empty string; got {campaign!r}")
    return campaign


def _check_memo_key(memo_key: Any) -> str | None:
    if memo_key is None:
        return None
    if not isinstance(memo_key, str) or not 16 <= len(memo_key) <= 128:
        raise ValueError("memo_key must be a string of 16 to 128 characters (an HMAC, in hex)")
    return memo_key


def _json(report: Any) -> str:
    try:
        return json.dumps(report, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"report must be a JSON-safe payload: {error}") from error


def _iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="minutes").replace("+00:00", "Z")
