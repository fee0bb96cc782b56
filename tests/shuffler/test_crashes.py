"""SIGKILL of the shuffler while devices upload and of the collector while the shuffler
forwards: every report a device recorded is, in the end, stored by the collector or still
waiting in the shuffler (below min_batch), exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from client_sdk.client import TelemetryClient
from shuffler.storage import ShufflerStorage
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment
from tests.shuffler.test_e2e import CAMPAIGN, MIN_BATCH, _wait_for

ROUNDS, PER_ROUND = 12, 100


def _device(deployment: Deployment, state_dir: Path, recorded: list[str]) -> None:
    labels = CAMPAIGN["domain"]
    with TelemetryClient(
        deployment.collector.url,
        state_dir=state_dir,
        shuffler_url=deployment.shuffler.url,
        retries=1,
        backoff_factor=0.05,
        flush_deadline=5.0,
        batch_size=50,
    ) as client:
        for round_ in range(ROUNDS):
            recorded += client.record_many(
                CAMPAIGN["name"], [labels[(round_ + i) % 4] for i in range(PER_ROUND)]
            )
            _flush_until_empty(client)
            time.sleep(0.05)


def _flush_until_empty(client: TelemetryClient, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while client.pending() and time.monotonic() < deadline:
        client.flush(force=True)
        if client.pending():
            time.sleep(0.2)  # the shuffler is down: the reports stay queued
    assert client.pending() == 0


def _settled(deployment: Deployment) -> tuple[int, int]:
    stored = len(stored_ids(deployment.collector.db, CAMPAIGN["name"]))
    with ShufflerStorage(deployment.root / "shuffler.db") as storage:
        waiting = sum(storage.pending_counts().values()) + storage.in_flight()
    return stored, waiting


@pytest.mark.slow
def test_every_acknowledged_report_is_stored_exactly_once(tmp_path: Path) -> None:
    deployment = Deployment(tmp_path, campaign=CAMPAIGN)
    deployment.start()
    try:
        recorded: list[str] = []
        device = threading.Thread(target=_device, args=(deployment, tmp_path / "dev", recorded))
        device.start()
        assert _wait_for(lambda: len(recorded) >= PER_ROUND)
        deployment.shuffler.kill()  # while devices upload
        time.sleep(0.5)  # down for a while: not a wait for anything
        deployment.shuffler.start()
        assert _wait_for(lambda: bool(stored_ids(deployment.collector.db, CAMPAIGN["name"])))
        deployment.collector.kill()  # while the shuffler forwards
        time.sleep(0.5)
        deployment.collector.start()
        time.sleep(0.7)
        deployment.shuffler.kill()
        deployment.collector.kill()
        deployment.collector.start()
        deployment.shuffler.start()
        device.join(120)
        assert not device.is_alive() and len(recorded) == ROUNDS * PER_ROUND
        total = ROUNDS * PER_ROUND
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stored, waiting = _settled(deployment)
            if waiting < MIN_BATCH and stored + waiting == total:
                break
            time.sleep(0.2)
        stored, waiting = _settled(deployment)
        assert stored + waiting == total, (stored, waiting)
        assert waiting < MIN_BATCH and stored >= total - MIN_BATCH
    finally:
        deployment.stop()
