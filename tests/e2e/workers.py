"""Client processes for the end-to-end tests (spawned, so this module must be importable)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from client_sdk import TelemetryClient


def append_ids(path: str, ids: list[str]) -> None:
    """Record ids durably once ``record_many`` returned (they are in the outbox by then)."""
    with open(path, "a", encoding="ascii") as handle:
        handle.write("".join(f"{i}\n" for i in ids))
        handle.flush()
        os.fsync(handle.fileno())


def read_ids(path: str | Path) -> list[str]:
    p = Path(path)
    return p.read_text().split() if p.exists() else []


def flush_until_empty(client: TelemetryClient, deadline: float) -> int:
    """Flush, riding out collector downtime, until the outbox is empty; total acknowledged."""
    acknowledged = 0
    while True:
        acknowledged += client.flush(force=True)  # never raises: what failed stays queued
        if client.pending() == 0:
            return acknowledged
        if time.monotonic() > deadline:
            raise RuntimeError(f"{client.pending()} reports still queued at the deadline")
        time.sleep(0.1)


def uploading_client(
    url: str,
    campaign: str,
    labels: list[str],
    state_dir: str,
    rounds: int,
    per_round: int,
    seed: int,
    out: str,
) -> None:
    """Record and flush in rounds (the collector may die and come back meanwhile)."""
    rng = np.random.default_rng(seed)
    deadline = time.monotonic() + 45
    acknowledged = 0
    with TelemetryClient(
        url, state_dir=state_dir, rng=rng, batch_size=100, retries=3, backoff_factor=0.05
    ) as client:
        for _ in range(rounds):
            values = [labels[i] for i in rng.integers(0, len(labels), size=per_round)]
            append_ids(f"{out}.recorded", record_when_reachable(client, campaign, values, deadline))
            acknowledged += client.flush(force=True)
        acknowledged += flush_until_empty(client, deadline)
    Path(f"{out}.acknowledged").write_text(str(acknowledged))


def record_when_reachable(
    client: TelemetryClient, campaign: str, values: list[str], deadline: float
) -> list[str]:
    """Record, retrying while the campaign cannot be fetched (the collector is down).

    ``record_many`` drops the values (and returns no ids) while the campaign is unavailable, so
    recording them again later is what this test's app does.
    """
    while True:
        ids = client.record_many(campaign, values)
        if ids:
            return ids
        if time.monotonic() > deadline:
            raise RuntimeError(f"campaign {campaign!r} stayed unavailable")
        time.sleep(0.1)


def recording_client(
    url: str, campaign: str, labels: list[str], state_dir: str, n: int, out: str
) -> None:
    """Record ``n`` values, then flush in small batches (slowly enough to be killed midway)."""
    with TelemetryClient(url, state_dir=state_dir, batch_size=20) as client:
        values = [labels[i % len(labels)] for i in range(n)]
        append_ids(f"{out}.recorded", client.record_many(campaign, values))
        Path(f"{out}.flushing").touch()
        client.flush()


def resuming_client(url: str, state_dir: str, out: str) -> None:
    """A restarted client: flush what its predecessor left in the outbox."""
    with TelemetryClient(url, state_dir=state_dir) as client:
        Path(f"{out}.resumed").write_text(str(client.flush()))
