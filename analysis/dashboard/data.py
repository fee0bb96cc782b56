"""What the dashboard reads: the collector's database, read-only, summarised incrementally.

The database is opened through ``collector.storage`` (``create=False``: a missing file or an
out-of-date schema is an error) with SQLite's ``query_only`` pragma on, so no statement of this
process can write to it while the collector runs beside it.

Each campaign's mergeable statistic (``Mechanism.aggregate``; ``+`` merges) is cached together
with the last report ``seq`` it has seen, and each refresh adds only the reports stored since
(:class:`CampaignCache`). Estimating from the statistic is O(k), so an update costs the new
reports, not the campaign's history. The estimate documents come from ``ldp-analyze estimate``'s
own functions (:func:`estimate_document`), so the page and the command print the same numbers.

Each day's statistic is kept too, so the campaign page's trend (the ``ldp-analyze estimate
--by day`` series: the top items' frequencies or the mean, per UTC day with its interval) costs
O(k) per day whose reports changed (:func:`trend_document`; frequency and mean campaigns).

Some estimators cost more than a poll should wait (EMS with its bootstrap for a distribution,
PEM's discovery, which reads every report again): once an estimate has taken longer than
``SLOW_ESTIMATE_SECONDS``, the next ones are made in a background thread and polls answer at
once with the previous document, whose own ``n`` says which reports it covers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from analysis.dashboard.views import render
from analysis.documents import daily_series_document, frequency_document, mean_document
from analysis.estimation import DocumentedEstimate, MeanEstimate, estimate, json_safe
from analysis.loading import estimable_candidates
from analysis.views.answer import campaign_unit
from analysis.views.dashboard import with_formats
from client_sdk.mechanisms.base import AggregateStatistic
from collector.storage import Storage, StoredCampaign

__all__ = [
    "CampaignCache",
    "CampaignState",
    "document_of",
    "estimate_document",
    "estimate_result",
    "estimate_view",
    "open_read_only",
    "trend_document",
]

CHUNK_SIZE = 50_000
SLOW_ESTIMATE_SECONDS = 0.5
"""An estimate whose last computation took longer is remade in a background thread; polls get
the previous document (its own ``n``) at once until the new one is ready."""
TREND_KINDS = frozenset({"frequencies", "mean"})
"""The estimate kinds whose per-day series the campaign page charts (``--by day`` tables)."""


def open_read_only(db: str | os.PathLike[str]) -> Storage:
    """The collector's database through ``collector.storage``, refusing every write."""
    storage = Storage(db, create=False)
    storage.conn.execute("PRAGMA query_only=ON")
    return storage


def estimate_result(campaign: StoredCampaign, reports: Any, *, confidence: float) -> Any:
    """The raw estimate of a campaign's reports (a statistic, an array or chunks of reports):
    the same dispatch as ``ldp-analyze estimate`` (``analysis.estimation.estimate`` with the
    campaign's candidates). ``ValueError`` for a campaign that has no estimator (a RAPPOR
    campaign without a candidate list, say); ``TypeError`` when the kind reads the reports
    themselves and a merged statistic was given (PEM discovery)."""
    candidates = estimable_candidates(campaign)
    return estimate(campaign.mechanism, reports, confidence=confidence, candidates=candidates)


def document_of(campaign: StoredCampaign, result: Any) -> dict[str, Any]:
    """The ``ldp-analyze estimate --format json`` document of a raw estimate (the command's own
    document functions)."""
    if isinstance(result, DocumentedEstimate):
        return json_safe({"campaign": campaign.name, **result.to_dict()})
    if isinstance(result, MeanEstimate):
        return mean_document(campaign, result)
    return frequency_document(campaign, result)


def estimate_document(
    campaign: StoredCampaign, statistic: AggregateStatistic, *, confidence: float
) -> dict[str, Any]:
    """The ``ldp-analyze estimate --format json`` document of a campaign's statistic."""
    return document_of(campaign, estimate_result(campaign, statistic, confidence=confidence))


def estimate_view(
    campaign: StoredCampaign, reports: Any, *, confidence: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The estimate document of ``reports`` and its dashboard view (``views.render``)."""
    result = estimate_result(campaign, reports, confidence=confidence)
    document = document_of(campaign, result)
    display = render(campaign.mechanism.estimate_kind, document, result)
    return document, with_formats(display, campaign_unit(campaign.metadata))


@dataclasses.dataclass
class CampaignState:
    """One campaign's cached summary: reports per day and the statistic up to ``seq``."""

    campaign: StoredCampaign
    seq: int = 0
    days: dict[str, int] = dataclasses.field(default_factory=dict)
    statistic_seq: int = 0
    statistic: AggregateStatistic | None = None
    document: dict[str, Any] | None = None
    display: dict[str, Any] | None = None
    document_seq: int = -1
    estimate_seconds: float = 0.0
    refreshing: bool = False
    day_statistics: dict[str, AggregateStatistic] = dataclasses.field(default_factory=dict)
    """Each UTC day's statistic (trend kinds only): they add up to ``statistic``."""
    day_estimates: dict[str, tuple[int, Any]] = dataclasses.field(default_factory=dict)
    """Each day's ``(n, raw estimate)`` (``None`` below ``min_batch_size``), remade when its n
    changes."""
    trend: dict[str, Any] | None = None
    """The ``--by day`` series document of the days (trend kinds at ``min_batch_size``)."""
    trend_seq: int = -1
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @property
    def n(self) -> int:
        return sum(self.days.values())

    @property
    def released(self) -> bool:
        """Whether the campaign has reached its ``min_batch_size`` (below it only n is shown)."""
        return self.n >= self.campaign.min_batch_size

    @property
    def has_trend(self) -> bool:
        """Whether the page charts this campaign's per-day estimates (:data:`TREND_KINDS`)."""
        return self.campaign.mechanism.estimate_kind in TREND_KINDS


def trend_document(state: CampaignState, *, confidence: float) -> dict[str, Any]:
    """The daily series (``analysis.documents.daily_series_document``, as ``ldp-analyze estimate
    --by day --format json`` prints it) of ``state.day_statistics``. A day's estimate is remade
    only when its n changed; a day below ``min_batch_size`` shows its n only."""
    campaign = state.campaign
    points = []
    for day in sorted(state.day_statistics):
        statistic = state.day_statistics[day]
        n = int(statistic.n)
        cached = state.day_estimates.get(day)
        if cached is None or cached[0] != n:
            result = None
            if n >= campaign.min_batch_size:
                result = estimate_result(campaign, statistic, confidence=confidence)
            cached = state.day_estimates[day] = (n, result)
        points.append((day, n, cached[1]))
    return daily_series_document(campaign, points, since=None, until=None, confidence=confidence)


class CampaignCache:
    """Per-campaign summaries of one database, updated from the last report seen.

    Thread-safe: one lock per campaign, so a slow first aggregation of one campaign does not
    hold up another.
    """

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        confidence: float = 0.95,
        slow_seconds: float = SLOW_ESTIMATE_SECONDS,
    ) -> None:
        self.db = os.fspath(db)
        self.confidence = confidence
        self.slow_seconds = slow_seconds
        self._states: dict[str, CampaignState] = {}
        self._lock = threading.Lock()

    def _state(self, campaign: StoredCampaign) -> CampaignState:
        with self._lock:
            state = self._states.get(campaign.name)
            if state is None or state.campaign.config_id != campaign.config_id:
                state = CampaignState(campaign)
                self._states[campaign.name] = state
            return state

    def campaigns(self, storage: Storage) -> list[CampaignState]:
        """Every campaign with its per-day counts brought up to date (not its statistic)."""
        states = []
        for campaign in storage.list_campaigns():
            state = self._state(campaign)
            with state.lock:
                self._update_days(storage, state, _last_seq(storage, campaign.name))
            states.append(state)
        return states

    def campaign(self, storage: Storage, name: str) -> CampaignState:
        """One campaign with its counts, statistic and estimate document up to date.

        ``LookupError`` (``CampaignNotFound``) for an unknown name. Below ``min_batch_size``
        the statistic is kept up to date but no document is made.
        """
        state = self._state(storage.get_campaign(name))
        with state.lock:
            upto = _last_seq(storage, name)
            self._update_days(storage, state, upto)
            self._update_statistic(storage, state, upto)
            if state.released and state.document_seq != state.statistic_seq:
                slow = state.estimate_seconds > self.slow_seconds
                if state.document is None or not slow:
                    self._estimate(storage, state, state.statistic, state.statistic_seq)
                elif not state.refreshing:
                    state.refreshing = True
                    threading.Thread(
                        target=self._refresh,
                        args=(state, state.statistic, state.statistic_seq),
                        name=f"ldp-dashboard-estimate-{name}",
                        daemon=True,
                    ).start()
            if state.released and state.has_trend and state.trend_seq != state.statistic_seq:
                state.trend = trend_document(state, confidence=self.confidence)
                state.trend_seq = state.statistic_seq
        return state

    def _estimate(
        self, storage: Storage, state: CampaignState, statistic: Any, seq: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The document and view of ``statistic`` (the reports up to ``seq``), timed."""
        start = time.perf_counter()
        try:
            made = estimate_view(state.campaign, statistic, confidence=self.confidence)
        except TypeError:  # discovery reads the reports themselves: all of them again
            chunks = _report_chunks(storage, state.campaign, 0, seq)
            made = estimate_view(state.campaign, chunks, confidence=self.confidence)
        state.estimate_seconds = time.perf_counter() - start
        state.document, state.display = made
        state.document_seq = seq
        return made

    def _refresh(self, state: CampaignState, statistic: Any, seq: int) -> None:
        """A slow estimate remade in the background; the page keeps the previous one (with its
        own n) meanwhile. Published only if nothing newer replaced the state since."""
        try:
            with open_read_only(self.db) as storage:
                fresh = CampaignState(state.campaign)
                self._estimate(storage, fresh, statistic, seq)
        except Exception:  # the next poll tries again, in the foreground
            fresh = None
        with state.lock:
            state.refreshing = False
            if fresh is not None and state.statistic_seq >= seq > state.document_seq:
                state.document, state.display = fresh.document, fresh.display
                state.document_seq, state.estimate_seconds = seq, fresh.estimate_seconds

    def warm(self) -> tuple[int, int]:
        """Bring every campaign up to date (what a first view would do); ``(campaigns, n)``.

        Run in a background thread when the server starts, so the first page of a large
        campaign does not wait for its whole history. A campaign that cannot be estimated is
        skipped here; its page says why.
        """
        reports = 0
        with open_read_only(self.db) as storage:
            names = [campaign.name for campaign in storage.list_campaigns()]
            for name in names:
                try:
                    reports += self.campaign(storage, name).n
                except (LookupError, ValueError):
                    continue
        return len(names), reports

    def _update_days(self, storage: Storage, state: CampaignState, upto: int) -> None:
        if upto < state.seq:  # the database was replaced under us: start again
            state.seq, state.days, state.statistic_seq, state.statistic = 0, {}, 0, None
            state.document, state.display, state.document_seq = None, None, -1
            state.day_statistics, state.day_estimates, state.trend = {}, {}, None
            state.trend_seq = -1
        if upto == state.seq:
            return
        for day, count in _day_counts(storage, state.campaign.name, state.seq, upto):
            state.days[day] = state.days.get(day, 0) + count
        state.seq = upto

    def _update_statistic(self, storage: Storage, state: CampaignState, upto: int) -> None:
        mechanism = state.campaign.mechanism
        if state.statistic is None:
            state.statistic, state.statistic_seq = mechanism.empty_statistic(), 0
        if upto == state.statistic_seq:
            return
        statistic = state.statistic
        if state.has_trend:  # split by day; the days add up to the whole statistic
            for day, chunk in _day_chunks(storage, state.campaign, state.statistic_seq, upto):
                part = mechanism.aggregate(chunk)
                statistic = statistic + part
                known = state.day_statistics.get(day)
                state.day_statistics[day] = part if known is None else known + part
        else:
            for chunk in _report_chunks(storage, state.campaign, state.statistic_seq, upto):
                statistic = statistic + mechanism.aggregate(chunk)
        state.statistic, state.statistic_seq = statistic, upto


# ---- queries ------------------------------------------------------------------------------------


def _last_seq(storage: Storage, name: str) -> int:
    row = storage.conn.execute(
        "SELECT coalesce(max(seq), 0) FROM reports "
        "WHERE campaign_id = (SELECT id FROM campaigns WHERE name = ?)",
        [name],
    ).fetchone()
    return int(row[0])


def _day_counts(storage: Storage, name: str, after: int, upto: int) -> list[tuple[str, int]]:
    """Stored reports per UTC day among those with ``after < seq <= upto``."""
    rows = storage.conn.execute(
        "SELECT day, count(*) FROM reports "
        "WHERE campaign_id = (SELECT id FROM campaigns WHERE name = ?) AND seq > ? AND seq <= ? "
        "GROUP BY day",
        [name, after, upto],
    ).fetchall()
    return [(str(day), int(count)) for day, count in rows]


def _report_chunks(
    storage: Storage, campaign: StoredCampaign, after: int, upto: int
) -> Iterator[Any]:
    """The decoded reports with ``after < seq <= upto``, chunk by chunk."""
    mechanism = campaign.mechanism
    for rows in storage.iter_payload_chunks(
        campaign.name, chunk_size=CHUNK_SIZE, after=after, upto=upto
    ):
        payloads = json.loads("[" + ",".join(row[2] for row in rows) + "]")
        yield mechanism.from_wire(payloads)


def _day_chunks(
    storage: Storage, campaign: StoredCampaign, after: int, upto: int
) -> Iterator[tuple[str, Any]]:
    """The decoded reports with ``after < seq <= upto`` as ``(day, reports)``, chunk by chunk
    (one read of the range; each chunk split by the UTC day it was stored)."""
    mechanism = campaign.mechanism
    last = after
    while last < upto:
        rows = storage.conn.execute(
            "SELECT seq, day, payload FROM reports "
            "WHERE campaign_id = (SELECT id FROM campaigns WHERE name = ?) AND seq > ? "
            "AND seq <= ? ORDER BY seq LIMIT ?",
            [campaign.name, last, upto, CHUNK_SIZE],
        ).fetchall()
        if not rows:
            return
        last = int(rows[-1][0])
        by_day: dict[str, list[str]] = {}
        for _, day, payload in rows:
            by_day.setdefault(str(day), []).append(payload)
        for day, payloads in sorted(by_day.items()):
            yield day, mechanism.from_wire(json.loads("[" + ",".join(payloads) + "]"))
