"""What the dashboard reads: the collector's database, read-only, summarised incrementally.

The database is opened through ``collector.storage`` (``create=False``: a missing file or an
out-of-date schema is an error) with SQLite's ``query_only`` pragma on, so no statement of this
process can write to it while the collector runs beside it.

Each campaign's mergeable statistic (``Mechanism.aggregate``; ``+`` merges) is cached together
with the last report ``seq`` it has seen, and each refresh adds only the reports stored since
(:class:`CampaignCache`). Estimating from the statistic is O(k), so an update costs the new
reports, not the campaign's history. The estimate documents come from ``ldp-analyze estimate``'s
own functions (:func:`estimate_document`), so the page and the command print the same numbers.

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
from analysis.documents import frequency_document, mean_document
from analysis.estimation import DocumentedEstimate, MeanEstimate, estimate, json_safe
from analysis.loading import estimable_candidates
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
]

CHUNK_SIZE = 50_000
SLOW_ESTIMATE_SECONDS = 0.5
"""An estimate whose last computation took longer is remade in a background thread; polls get
the previous document (its own ``n``) at once until the new one is ready."""


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
    return document, with_formats(render(campaign.mechanism.estimate_kind, document, result))


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
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    @property
    def n(self) -> int:
        return sum(self.days.values())

    @property
    def released(self) -> bool:
        """Whether the campaign has reached its ``min_batch_size`` (below it only n is shown)."""
        return self.n >= self.campaign.min_batch_size


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
