"""Where the dashboard's numbers come from: one collector database, or several shards.

Both backends answer the same questions (:class:`Backend`): the campaign list, one campaign's
state with its estimate, and a time window's estimate. :class:`SingleDatabase` is the live
incremental path over one ``--db`` (``analysis.dashboard.data.CampaignCache``). :class:`Shards`
merges several ``--db`` and ``--parquet`` sources through the scale-out API
(``analysis.sources``: ``plan``, ``LocalEngine``, ``estimate_merged``; docs/scale-out.md): each
report id counts once, the sources holding a campaign must agree on its ``config_id``, and a
window keeps the copies stored on its days (a Parquet export reads only those days' files).

A merged estimate is recomputed only when the sources' stored copies changed (their count per
source, read with each poll); the whole merge then runs again, since a copy arriving in one
shard may duplicate one in another. When the last merge took longer than
``SLOW_ESTIMATE_SECONDS``, the next runs in a background thread and polls get the previous
state meanwhile (its n and estimate agree; ``refreshing`` says a newer one is coming).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from analysis.dashboard.data import (
    SLOW_ESTIMATE_SECONDS,
    CampaignCache,
    CampaignState,
    document_of,
    estimable_candidates,
    estimate_view,
    open_read_only,
    trend_document,
)
from analysis.dashboard.views import render
from analysis.views.answer import campaign_unit
from analysis.views.dashboard import with_formats
from collector.export import CAMPAIGN_DOCUMENT
from collector.storage import CampaignNotFound, StoredCampaign, StoredDapCampaign

__all__ = ["Backend", "Shards", "SingleDatabase", "Window", "open_backend"]

Window = tuple[StoredCampaign, int, tuple[dict[str, Any], dict[str, Any]] | None]
"""A window's campaign, its n, and (at or above ``min_batch_size``) its document and view."""


class Backend(Protocol):
    confidence: float

    def labels(self) -> list[str]:
        """The sources, as the command line named them."""

    def campaigns(self) -> list[CampaignState]:
        """Every campaign with its n and per-day counts up to date."""

    def campaign(self, name: str) -> CampaignState:
        """One campaign with its estimate up to date; ``CampaignNotFound`` (a ``LookupError``),
        ``ValueError`` when it cannot be estimated (or its sources disagree)."""

    def stored(self, name: str) -> StoredCampaign:
        """The campaign's stored document; ``LookupError`` when no source holds it."""

    def window(self, name: str, since: str | None, until: str | None) -> Window:
        """The estimate of the copies stored from ``since`` to ``until`` (checked days)."""

    def warm(self) -> tuple[int, int]:
        """Bring every campaign up to date; ``(campaigns, reports)``."""

    def secure_aggregation(self) -> list[StoredDapCampaign]:
        """The secure-aggregation campaigns (no reports here: their Leader's), by name."""


def open_backend(
    dbs: Sequence[str | os.PathLike[str]],
    parquets: Sequence[str | os.PathLike[str]] = (),
    *,
    confidence: float = 0.95,
) -> Backend:
    """One ``--db`` alone: the live incremental path; anything else: merged shards."""
    if len(dbs) == 1 and not parquets:
        return SingleDatabase(dbs[0], confidence=confidence)
    return Shards(dbs, parquets, confidence=confidence)


class SingleDatabase:
    """One collector database, summarised incrementally (:class:`CampaignCache`)."""

    def __init__(self, db: str | os.PathLike[str], *, confidence: float = 0.95) -> None:
        self.db = os.fspath(db)
        self.confidence = confidence
        self.cache = CampaignCache(self.db, confidence=confidence)
        open_read_only(self.db).close()  # fail now, not at the first request

    def labels(self) -> list[str]:
        return [f"--db {self.db}"]

    def campaigns(self) -> list[CampaignState]:
        with open_read_only(self.db) as storage:
            return self.cache.campaigns(storage)

    def campaign(self, name: str) -> CampaignState:
        with open_read_only(self.db) as storage:
            return self.cache.campaign(storage, name)

    def stored(self, name: str) -> StoredCampaign:
        with open_read_only(self.db) as storage:
            return storage.get_campaign(name)

    def secure_aggregation(self) -> list[StoredDapCampaign]:
        return _secure_aggregation([self.db])

    def window(self, name: str, since: str | None, until: str | None) -> Window:
        with open_read_only(self.db) as storage:
            campaign = storage.get_campaign(name)
            n = storage.count_reports(name, since=since, until=until)
            if n < campaign.min_batch_size:
                return campaign, n, None
            chunks = storage.iter_report_chunks(name, since=since, until=until)
            return campaign, n, estimate_view(campaign, chunks, confidence=self.confidence)

    def warm(self) -> tuple[int, int]:
        return self.cache.warm()


class Shards:
    """Several ``--db`` and ``--parquet`` sources of the same campaigns, merged."""

    def __init__(
        self,
        dbs: Sequence[str | os.PathLike[str]],
        parquets: Sequence[str | os.PathLike[str]] = (),
        *,
        confidence: float = 0.95,
        slow_seconds: float = SLOW_ESTIMATE_SECONDS,
    ) -> None:
        if not dbs and not parquets:
            raise ValueError("give at least one source: --db PATH or --parquet DIR")
        self.dbs = [os.fspath(p) for p in dbs]
        self.parquets = [os.fspath(p) for p in parquets]
        self.confidence = confidence
        self.slow_seconds = slow_seconds
        self._states: dict[str, tuple[Any, CampaignState, tuple[Any, Any, Any]]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        for db in self.dbs:
            open_read_only(db).close()
        self._parquet_names = [self._exported_name(p) for p in self.parquets]

    @staticmethod
    def _exported_name(directory: str) -> str:
        path = Path(directory) / CAMPAIGN_DOCUMENT
        try:
            return str(json.loads(path.read_text(encoding="utf-8"))["name"])
        except (OSError, ValueError, KeyError, TypeError):
            raise ValueError(
                f"--parquet {directory}: no readable {CAMPAIGN_DOCUMENT} (not an export "
                "directory: ldp-collector export --out DIR writes one)"
            ) from None

    def labels(self) -> list[str]:
        return [f"--db {p}" for p in self.dbs] + [f"--parquet {p}" for p in self.parquets]

    def secure_aggregation(self) -> list[StoredDapCampaign]:
        return _secure_aggregation(self.dbs)

    def _names(self) -> list[str]:
        names: list[str] = []
        for db in self.dbs:
            with open_read_only(db) as storage:
                names += [c.name for c in storage.list_campaigns()]
        names += self._parquet_names
        return sorted(set(names))

    def _holders(self, name: str) -> tuple[list[str], list[str]]:
        """The sources that hold campaign ``name``."""
        dbs = []
        for db in self.dbs:
            with open_read_only(db) as storage:
                try:
                    storage.get_campaign(name)
                except CampaignNotFound:
                    continue
            dbs.append(db)
        parquets = [p for p, n in zip(self.parquets, self._parquet_names, strict=True) if n == name]
        if not dbs and not parquets:
            raise CampaignNotFound(f"no source holds a campaign named {name!r}")
        return dbs, parquets

    def _plan(self, name: str, since: str | None = None, until: str | None = None) -> Any:
        from analysis.sources import plan

        dbs, parquets = self._holders(name)
        return plan(name, dbs, parquets, since=since, until=until)

    def _merged(self, work: Any, *, by_day: bool) -> tuple[Any, Any]:
        from analysis.sources import LocalEngine

        engine = LocalEngine()
        return engine, engine.aggregate(work, by_day=by_day)

    def _estimate(self, work: Any, engine: Any, merged: Any) -> tuple[dict[str, Any], Any]:
        from analysis.sources import estimate_merged

        campaign = work.campaign
        result = estimate_merged(
            engine,
            work,
            merged,
            confidence=self.confidence,
            candidates=estimable_candidates(campaign),
        )
        document = document_of(campaign, result)
        display = render(campaign.mechanism.estimate_kind, document, result)
        return document, with_formats(display, campaign_unit(campaign.metadata))

    def _lock_of(self, name: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(name, threading.Lock())

    def _build(self, work: Any, *, estimate: bool) -> tuple[CampaignState, tuple[Any, Any, Any]]:
        """Merge the plan's sources (by day) and, when asked and released, estimate; timed."""
        start = time.perf_counter()
        engine, merged = self._merged(work, by_day=True)
        state = CampaignState(work.campaign)
        state.days = {day: int(statistic.n) for day, statistic in merged.days}
        state.statistic = merged.statistic
        parts = (work, engine, merged)
        if state.has_trend:
            state.day_statistics = dict(merged.days)
        if estimate and state.released:
            state.document, state.display = self._estimate(*parts)
            if state.has_trend:
                state.trend = trend_document(state, confidence=self.confidence)
        state.estimate_seconds = time.perf_counter() - start
        return state, parts

    def _update(self, name: str, *, estimate: bool) -> CampaignState:
        """The campaign's merged state, remade when a source's stored copies changed: at once
        the first time or when the last merge was quick, else in a background thread while
        polls get the previous state (``refreshing``)."""
        with self._lock_of(name):
            work = self._plan(name)
            key = (work.sources, work.total, work.campaign.config_id)
            cached = self._states.get(name)
            if cached is None or (
                cached[0] != key and cached[1].estimate_seconds <= self.slow_seconds
            ):
                state, parts = self._build(work, estimate=estimate)
                self._states[name] = (key, state, parts)
                return state
            old_key, state, parts = cached
            if old_key != key and not state.refreshing:
                state.refreshing = True
                threading.Thread(
                    target=self._refresh,
                    args=(name, work, key, state.document is not None or estimate),
                    name=f"ldp-dashboard-merge-{name}",
                    daemon=True,
                ).start()
            if estimate and state.released and state.document is None:
                state.document, state.display = self._estimate(*parts)
                if state.has_trend:
                    state.trend = trend_document(state, confidence=self.confidence)
            return state

    def _refresh(self, name: str, work: Any, key: Any, estimate: bool) -> None:
        try:
            built: tuple[CampaignState, tuple[Any, Any, Any]] | None = self._build(
                work, estimate=estimate
            )
        except Exception:  # the next poll tries again
            built = None
        with self._lock_of(name):
            _, old, _ = self._states[name]
            old.refreshing = False
            if built is not None:
                self._states[name] = (key, *built)

    def campaigns(self) -> list[CampaignState]:
        return [self._update(name, estimate=False) for name in self._names()]

    def campaign(self, name: str) -> CampaignState:
        return self._update(name, estimate=True)

    def stored(self, name: str) -> StoredCampaign:
        from analysis.sources import open_sources

        dbs, parquets = self._holders(name)
        return open_sources(name, dbs, parquets)[0]

    def window(self, name: str, since: str | None, until: str | None) -> Window:
        work = self._plan(name, since, until)
        engine, merged = self._merged(work, by_day=False)
        n = int(merged.statistic.n)
        if n < work.campaign.min_batch_size:
            return work.campaign, n, None
        return work.campaign, n, self._estimate(work, engine, merged)

    def warm(self) -> tuple[int, int]:
        reports = 0
        names = self._names()
        for name in names:
            try:
                reports += self.campaign(name).n
            except (LookupError, ValueError):
                continue
        return len(names), reports


def _secure_aggregation(dbs: Sequence[str]) -> list[StoredDapCampaign]:
    """The secure-aggregation campaigns the databases hold (the first copy of each name)."""
    found: dict[str, StoredDapCampaign] = {}
    for db in dbs:
        with open_read_only(db) as storage:
            for campaign in storage.list_all_campaigns():
                if isinstance(campaign, StoredDapCampaign):
                    found.setdefault(campaign.name, campaign)
    return [found[name] for name in sorted(found)]
