"""The forwarder: batches of at least ``min_batch`` sealed reports, in a CSPRNG order with fresh
report ids, sent to the collector's ``POST /v1/campaigns/<name>/batches`` with the shuffler
token, deleted only once the collector acknowledged them (Bittau et al., "Prochlo", SOSP 2017).

A batch is formed (committed) before it is sent, so a crash of either side resends the same
batch id and the collector answers it without storing twice. Fewer than ``min_batch`` pending
reports of a campaign are never forwarded. Logs carry counts only, never an id or a payload.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import requests

from shuffler.storage import Batch, ShufflerStorage

__all__ = ["Forwarder"]

logger = logging.getLogger(__name__)


class Forwarder:
    """Forward what is due, once (:meth:`run_once`) or in a loop (:meth:`run`)."""

    def __init__(
        self,
        db: str,
        collector: str,
        token: str,
        *,
        max_batch: int = 10_000,
        interval: float = 0.2,
        timeout: float = 30.0,
    ) -> None:
        self.storage = ShufflerStorage(db)
        self.collector = collector.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.max_batch = max_batch
        self.interval = interval
        self.timeout = timeout
        self.session = requests.Session()
        self.stopped = threading.Event()

    def min_batch(self, campaign: str) -> int | None:
        """The campaign's ``shuffle.min_batch`` from the collector (``None``: not shuffled or
        the collector does not answer)."""
        try:
            response = self.session.get(
                f"{self.collector}/v1/campaigns/{campaign}", timeout=self.timeout
            )
        except requests.RequestException:
            return None
        if response.status_code != 200:
            return None
        shuffle = response.json().get("shuffle")
        return int(shuffle["min_batch"]) if isinstance(shuffle, dict) else None

    def send(self, batch: Batch) -> bool:
        """POST one batch; delete it when acknowledged. ``True`` when it was."""
        batch_id, campaign, config_id, reports = batch
        body = {
            "batch_id": batch_id,
            "config_id": config_id,
            "reports": [{"id": fresh, "payload": json.loads(env)} for fresh, env in reports],
        }
        try:
            response = self.session.post(
                f"{self.collector}/v1/campaigns/{campaign}/batches",
                json=body,
                headers=self.headers,
                timeout=self.timeout,
            )
        except requests.RequestException:
            logger.warning("the collector did not answer a batch of %d; will retry", len(reports))
            return False
        if response.status_code != 200:
            logger.warning(
                "the collector answered %d to a batch of %d; will retry",
                response.status_code,
                len(reports),
            )
            return False
        result: dict[str, Any] = response.json()
        self.storage.delete_batch(batch_id)
        logger.info(
            "forwarded a batch of %d: %d accepted, %d duplicate, %d rejected",
            len(reports),
            result.get("accepted", 0),
            result.get("duplicate", 0),
            len(result.get("rejected", [])),
        )
        return True

    def run_once(self) -> int:
        """Resend open batches, form new ones where ``min_batch`` are pending, send them;
        how many batches were acknowledged."""
        sent = sum(self.send(batch) for batch in self.storage.open_batches())
        for campaign, count in self.storage.pending_counts().items():
            minimum = self.min_batch(campaign)
            if minimum is None or count < minimum:
                continue
            while self.storage.form_batch(campaign, minimum, self.max_batch) is not None:
                pass
        # One refused batch (kept, and retried next round) never holds back the others.
        return sent + sum(self.send(batch) for batch in self.storage.open_batches())

    def run(self) -> None:
        """Loop until :meth:`stop`; errors are logged (without content) and retried."""
        while not self.stopped.is_set():
            try:
                self.run_once()
            except Exception as error:  # keep forwarding after a transient database error
                logger.warning("forwarding failed (%s); will retry", type(error).__name__)
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()
