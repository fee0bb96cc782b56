"""The forwarder: batches of at least ``min_batch`` sealed reports, in a CSPRNG order with fresh
report ids, sent to the collector's ``POST /v1/campaigns/<name>/batches`` with the shuffler
token, deleted only once the collector acknowledged them (Bittau et al., "Prochlo", SOSP 2017).

When a batch leaves (docs/shuffler.md, "Forwarding"):

* without a maximum wait, as soon as ``min_batch`` reports of a campaign wait;
* with ``max_wait`` seconds, once ``max_batch`` reports wait (a full batch), or once the
  campaign's oldest waiting report has waited ``max_wait`` seconds, whichever comes first;

and in either case everything that can leaves, cut into nearly equal batches of at most
``max_batch`` (``shuffler.storage.batch_sizes``). Fewer than ``min_batch`` waiting reports never
leave: a smaller batch is not amplified enough. A report that waited more than ``max_age``
seconds is dropped instead (``ShufflerStorage.expire``, at most every :data:`EXPIRE_EVERY`
seconds; counted per campaign in ``/metrics``), so junk cannot fill the disk for good.

A batch is formed (committed) before it is sent, so a crash of either side resends the same
batch id and the collector answers it without storing twice.

A batch whose body is larger than ``max_request_bytes`` travels in parts: consecutive ranges of
its reports, each request at most that many bytes, sent in order, each marked ``"part":
{"start", "total"}``; the collector stores each part once and records the batch once, with the
size of all its parts (one batch for the guarantee). How far a batch got is committed after each
acknowledged part (``ShufflerStorage.batch_sent``), so a restart goes on from there. A 413 is
permanent for that request size: the limit is lowered (to the collector's
``max_content_length`` when its problem says it, else half the refused size) and the rest is cut
smaller; the same oversized body is never sent twice. Only a single report the collector refuses
as too large drops its batch (logged), as nothing smaller can be sent.

Several batches are in flight at once (``concurrency``), so each of the collector's workers opens
one. Logs carry counts only, never an id or a payload.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import requests

from shuffler.storage import DEFAULT_MAX_AGE, Batch, ShufflerStorage, batch_sizes
from shuffler.trust import DEFAULT_MIN_BATCH_FLOOR, shuffle_plan

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "EXPIRE_EVERY", "Forwarder"]

_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

EXPIRE_EVERY = 30.0
"""Seconds between two passes that drop reports older than ``max_age``."""

logger = logging.getLogger(__name__)

DROPPED_STATUSES = frozenset({409, 410, 413})
"""The collector will never take these batches (a configuration it no longer serves, a closed
campaign, a single report over its body limit): they are dropped, with their count logged, as
the SDK drops such queued reports."""
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""The largest request body sent (``--max-request-bytes``): half the collector's default limit."""


class Forwarder:
    """Forward what is due, once (:meth:`run_once`) or in a loop (:meth:`run`)."""

    def __init__(
        self,
        db: str,
        collector: str,
        token: str,
        *,
        max_batch: int = 10_000,
        max_wait: float | None = None,
        interval: float = 0.2,
        timeout: float = 30.0,
        concurrency: int = 2,
        min_batch_floor: int = DEFAULT_MIN_BATCH_FLOOR,
        max_age: float = DEFAULT_MAX_AGE,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        if max_wait is not None and not max_wait >= 0:
            raise ValueError(f"max_wait must be a number of seconds >= 0; got {max_wait!r}")
        if not max_age > 0:
            raise ValueError(f"max_age must be a number of seconds > 0; got {max_age!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1; got {concurrency!r}")
        self.storage = ShufflerStorage(db)
        self.collector = collector.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.interval = interval
        self.timeout = timeout
        self.concurrency = concurrency
        self.min_batch_floor = min_batch_floor
        self.max_age = max_age
        self.max_request_bytes = max_request_bytes
        self.max_request_reports = max_batch
        self._expired_at = -math.inf
        self.session = requests.Session()
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="ldp-forward")
        self.stopped = threading.Event()

    def plan(self, campaign: str) -> tuple[str, int] | None:
        """The campaign's current ``(config_id, min_batch)`` from the collector's document,
        verified and with ``min_batch`` at least the operator's floor (``shuffler.trust``);
        ``None``: not shuffled, unknown, a document that does not verify (logged), or the
        collector does not answer."""
        try:
            response = self.session.get(
                f"{self.collector}/v1/campaigns/{quote(campaign, safe='')}", timeout=self.timeout
            )
        except requests.RequestException:
            return None
        if response.status_code != 200:
            return None
        try:
            plan = shuffle_plan(response.json(), campaign, self.min_batch_floor)
        except ValueError as error:
            logger.warning("not forwarding: the collector's campaign document: %s", error)
            return None
        return None if plan is None else (plan.config_id, plan.min_batch)

    def due(self, waiting: int, min_batch: int, waited: float) -> list[int]:
        """The sizes of the batches that leave now, of ``waiting`` reports whose oldest has
        waited ``waited`` seconds (module docstring)."""
        if self.max_wait is not None and waited < self.max_wait:
            full = waiting // self.max_batch
            return [self.max_batch] * full if self.max_batch >= min_batch else []
        return batch_sizes(waiting, min_batch, self.max_batch)

    def expire_due(self) -> int:
        """Drop the reports older than ``max_age`` (once every :data:`EXPIRE_EVERY` seconds, or
        every ``max_age / 2`` if that is shorter); how many."""
        if time.monotonic() - self._expired_at < min(EXPIRE_EVERY, self.max_age / 2):
            return 0
        self._expired_at = time.monotonic()
        dropped = sum(self.storage.expire(self.max_age).values())
        if dropped:
            logger.warning(
                "dropped %d reports that waited more than %g s for a batch", dropped, self.max_age
            )
        return dropped

    def form_due(self) -> int:
        """Form every batch that is due, then drop what waited too long; how many batches."""
        now = time.time()
        since = self.storage.waiting_since()
        plans: dict[str, tuple[str, int] | None] = {}
        formed = 0
        for (campaign, config_id), count in self.storage.waiting().items():
            if campaign not in plans:
                plans[campaign] = self.plan(campaign)
            plan = plans[campaign]
            if plan is None:
                continue  # keep waiting until the collector says what to do
            current, min_batch = plan
            if config_id != current:
                dropped = self.storage.drop_waiting(campaign, config_id)
                logger.warning(
                    "dropped %d waiting reports made under a configuration the collector no "
                    "longer serves",
                    dropped,
                )
                continue
            for size in self.due(count, min_batch, now - since.get(campaign, now)):
                formed += self.storage.form_batch(campaign, config_id, size) is not None
        self.expire_due()  # after forming: a report that can leave in a batch does
        return formed

    def _request(self, campaign: str, body: bytes) -> tuple[int | None, dict[str, Any]]:
        """POST one body; its status (``None``: no answer) and the JSON answer (``{}`` if
        none)."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        try:
            response = session.post(
                f"{self.collector}/v1/campaigns/{quote(campaign, safe='')}/batches",
                data=body,
                headers=self.headers,
                timeout=self.timeout,
            )
        except requests.RequestException:
            return None, {}
        try:
            answer = response.json()
        except ValueError:
            answer = None
        return response.status_code, answer if isinstance(answer, dict) else {}

    def _too_large(self, size: int, count: int, problem: dict[str, Any]) -> None:
        """A 413 for a body of ``size`` bytes and ``count`` reports: never that large again."""
        limit = problem.get("max_content_length")
        bytes_limit = limit if type(limit) is int and limit > 0 else size // 2
        self.max_request_bytes = max(1, min(self.max_request_bytes, bytes_limit, size - 1))
        cap = problem.get("max_batch")
        if type(cap) is int and 0 < cap < count:
            self.max_request_reports = min(self.max_request_reports, cap)
        logger.warning(
            "the collector refused a request of %d bytes as too large; sending at most %d "
            "bytes and %d reports a request from now on",
            size,
            self.max_request_bytes,
            self.max_request_reports,
        )

    def _post(self, batch: Batch) -> int | None:
        """Deliver ``batch``, whole or in parts (module docstring); 200 once the collector
        acknowledged all of it, else the status that stopped it (``None``: no answer)."""
        whole = batch.body.encode("utf-8")
        if (
            batch.sent is None
            and len(whole) <= self.max_request_bytes
            and batch.size <= self.max_request_reports
        ):
            status, answer = self._request(batch.campaign, whole)
            if status != 413:
                if status == 200:
                    self._log(batch.size, answer)
                return status
            self._too_large(len(whole), batch.size, answer)
        document = json.loads(batch.body)
        reports = [_compact(r).encode("utf-8") for r in document["reports"]]
        # Every part says how the batch was metered (the guarantee is the whole batch's).
        metered = (
            f'"credentials":{_compact(document["credentials"])},'
            if "credentials" in document
            else ""
        )
        head = (
            f'{{"batch_id":"{batch.batch_id}","config_id":{_compact(batch.config_id)},'
            f'{metered}"part":{{"start":%d,"total":{len(reports)}}},"reports":['
        )
        sent = batch.sent or 0
        if batch.sent is None:
            self.storage.batch_sent(batch.batch_id, 0)  # in parts from now on, restarts too
        while sent < len(reports):
            prefix = (head % sent).encode("ascii")
            size, end = len(prefix) + 2, sent
            while end < len(reports) and end - sent < self.max_request_reports:
                grown = size + len(reports[end]) + (end > sent)
                if grown > self.max_request_bytes and end > sent:
                    break
                size, end = grown, end + 1
            body = prefix + b",".join(reports[sent:end]) + b"]}"
            status, answer = self._request(batch.campaign, body)
            if status == 413:
                if end - sent == 1:
                    return 413  # one report the collector will never take: nothing smaller
                self._too_large(len(body), end - sent, answer)
                continue
            if status != 200:
                return status
            self._log(end - sent, answer)
            sent = end
            self.storage.batch_sent(batch.batch_id, sent)
        return 200

    @staticmethod
    def _log(count: int, result: dict[str, Any]) -> None:
        logger.info(
            "forwarded %d reports: %d accepted, %d duplicate, %d rejected",
            count,
            result.get("accepted", 0),
            result.get("duplicate", 0),
            len(result.get("rejected", [])),
        )

    def send(self, batches: list[Batch]) -> int:
        """POST ``batches``, ``concurrency`` at a time; delete each one acknowledged (or one the
        collector will never take, :data:`DROPPED_STATUSES`). How many were acknowledged."""
        acknowledged = 0
        for batch, status in zip(batches, self._pool.map(self._post, batches), strict=True):
            if status == 200:
                self.storage.delete_batch(batch.batch_id)
                acknowledged += 1
            elif status in DROPPED_STATUSES:
                self.storage.delete_batch(batch.batch_id)
                logger.warning(
                    "the collector refused a batch of %d for good (%d); dropped", batch.size, status
                )
            else:
                # Kept and retried next round; one refused batch never holds back the others.
                logger.warning(
                    "the collector %s a batch of %d; will retry",
                    "did not answer" if status is None else f"answered {status} to",
                    batch.size,
                )
        return acknowledged

    def run_once(self) -> int:
        """Form what is due and send every open batch (resent ones included); how many batches
        were acknowledged."""
        self.form_due()
        return self.send(self.storage.open_batches())

    def run(self) -> None:
        """Loop until :meth:`stop` (at once again after a round that sent something); errors
        are logged (without content) and retried."""
        while not self.stopped.is_set():
            try:
                busy = self.run_once() > 0
            except Exception as error:  # keep forwarding after a transient database error
                logger.warning("forwarding failed (%s); will retry", type(error).__name__)
                busy = False
            if not busy:
                self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.storage.close()
