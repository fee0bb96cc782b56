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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from client_sdk.campaign import BudgetPolicy
from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.sqlite import connect, immediate

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
SCHEMA_VERSION = 1
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
    report TEXT
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
    ) -> None:
        directory = Path(state_dir)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = directory / LEDGER_FILE
        self._clock = clock
        self._lock = threading.Lock()
        self._connection = connect(self.path, timeout=30.0, synchronous="FULL", foreign_keys=True)
        with self._lock, immediate(self._connection):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._connection.execute(statement)
            self._connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            self._connection.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('last_seen', '0')"
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
            for cost, key, payload in checked:
                repeat = key is not None and self._has_memo_key(name, key)
                if not repeat:
                    self._check_fits(name, rules, cost, key is not None, spent, count, renews_at)
                charged = 0.0 if repeat else cost
                cursor = self._connection.execute(
                    "INSERT INTO spends (campaign, at, epsilon, charged, memoized, report) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (name, now, charged, int(not repeat), int(key is not None), payload),
                )
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
        return receipts

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
        query = "SELECT id, campaign, at, epsilon, charged, memoized, report FROM spends"
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
            )
            for row in reversed(rows)
        ]

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
