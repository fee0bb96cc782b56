"""A batch larger than the collector's body limit (real collector and shuffler processes, a
shuffled ``oue`` campaign with k = 16,384, about 3.8 kB a sealed report, under a 1 MiB body
limit): a campaign whose ``min_batch`` reports can never fit one request is refused at
creation; one just under the limit whose batch needs several requests is delivered completely,
exactly once, and recorded as one batch of its full size. The one 413 (the whole body, tried
first) is never repeated: the rest travels in parts."""

from __future__ import annotations

import itertools
import secrets
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.sealing import envelope_size
from collector.process import CollectorProcess
from collector.storage import shuffled_batch_bytes
from shuffler.forwarder import Forwarder
from shuffler.process import ShufflerProcess
from shuffler.storage import ShufflerStorage
from tests.collector.test_metrics import samples
from tests.e2e.conftest import stored_ids
from tests.shuffler.test_e2e import seal_for

LIMIT = 1024 * 1024
K = 16_384
TOKEN = secrets.token_urlsafe(32)


def campaign(name: str, min_batch: int) -> dict[str, object]:
    return {
        "name": name,
        "mechanism": {"mechanism": "oue", "k": K},
        "domain": [f"v{i}" for i in range(K)],
        "shuffle": {"min_batch": min_batch, "central_epsilon": 1.0, "delta": 1e-6},
    }


def batch_statuses(collector: CollectorProcess) -> dict[str, float]:
    """Answers of the collector's batches route, by status."""
    text = requests.get(f"{collector.url}/metrics", timeout=30).text
    return {
        labels["status"]: value
        for metric, labels, value in samples(text)
        if metric == "ldp_http_requests_total"
        and labels.get("app") == "collector"
        and labels.get("route", "").endswith("/batches")
    }


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("parts")
    process = CollectorProcess(root / "collector.db", workers=1, log_dir=root)
    process.env.update({"LDP_SHUFFLER_TOKEN": TOKEN, "LDP_MAX_CONTENT_LENGTH": str(LIMIT)})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def fitting(name: str) -> int:
    """The most sealed reports of campaign ``name`` one request of ``LIMIT`` bytes holds (the
    envelope's plaintext holds the campaign's name and config_id)."""
    document = {
        "name": name,
        "config_id": "0" * 32,
        "mechanism": {"mechanism": "oue", "epsilon": 1.0, "k": K},
    }
    envelope = envelope_size(document)
    fits = max(n for n in range(1, 400) if shuffled_batch_bytes(n, envelope, "0" * 32) <= LIMIT)
    assert 200 < fits < 300  # about 3.8 kB a report
    return fits


def test_a_campaign_whose_min_batch_never_fits_one_request_is_refused(
    collector: CollectorProcess,
) -> None:
    fits = fitting("too-big")
    refused = requests.post(
        f"{collector.url}/v1/campaigns",
        json=campaign("too-big", fits + 1),
        headers=collector.admin(),
        timeout=60,
    )
    assert refused.status_code == 400, refused.text[:300]
    assert refused.headers["Content-Type"] == "application/problem+json"
    detail = refused.json()["detail"]
    assert f"shuffle.min_batch {fits + 1}" in detail and f"{LIMIT} bytes" in detail
    assert f"at most {fits} such reports fit in one request" in detail


def test_a_batch_over_the_limit_travels_in_parts_once_as_one_batch(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    fits = fitting("just-under")
    document = collector.create_campaign(campaign("just-under", fits))  # just under: taken
    shuffler = ShufflerProcess(
        tmp_path / "shuffler.db", collector.url, token=TOKEN, workers=1, log_dir=tmp_path
    ).start()
    try:
        # One upload of 2.5 min_batch: one batch of about 2.6 MB, over the limit, in parts.
        n = int(2.5 * fits)
        mechanism = mechanism_from_config(document["mechanism"])
        payloads = mechanism.to_wire(mechanism.perturb(np.arange(n) % K))
        envelopes = seal_for(document, payloads)
        ids = [secrets.token_hex(16) for _ in range(n)]
        body = {
            "config_id": document["config_id"],
            "reports": [{"id": i, "payload": e} for i, e in zip(ids, envelopes, strict=True)],
        }
        answer = requests.post(
            f"{shuffler.url}/v1/campaigns/just-under/reports", json=body, timeout=60
        )
        assert answer.status_code == 200 and answer.json()["accepted"] == n

        deadline = time.monotonic() + 60
        while len(stored_ids(collector.db, "just-under")) < n:
            assert time.monotonic() < deadline, (
                f"the batch was never delivered: {batch_statuses(collector)}"
            )
            time.sleep(0.5)
        # The shuffler deletes a batch once acknowledged: after that nothing can be resent.
        while (
            "ldp_shuffler_in_flight_reports 0"
            not in requests.get(f"{shuffler.url}/metrics", timeout=30).text
        ):
            assert time.monotonic() < deadline, "the shuffler never saw its batch acknowledged"
            time.sleep(0.2)
        stored = stored_ids(collector.db, "just-under")
        assert len(stored) == len(set(stored)) == n  # completely, exactly once

        conn = sqlite3.connect(collector.db)
        try:
            batches = conn.execute("SELECT size, total FROM batches").fetchall()
            parts = conn.execute("SELECT start, count FROM batch_parts ORDER BY start").fetchall()
        finally:
            conn.close()
        assert batches == [(n, n)]  # one logical batch, of its full size
        assert len(parts) >= 3 and parts[0][0] == 0
        assert all(a + c == b for (a, c), (b, _) in itertools.pairwise(parts))
        assert parts[-1][0] + parts[-1][1] == n  # consecutive ranges covering the batch
        statuses = batch_statuses(collector)
        assert statuses.get("413", 0) == 1  # the whole body, once; never resent
        assert statuses["200"] == len(parts)
    finally:
        shuffler.stop()


def test_a_crash_between_parts_goes_on_in_parts_and_counts_each_report_once(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    document = collector.create_campaign(campaign("crashy", 50))
    n = 300  # about 1.15 MB: over the 1 MiB limit
    mechanism = mechanism_from_config(document["mechanism"])
    payloads = mechanism.to_wire(mechanism.perturb(np.arange(n) % K))
    envelopes = seal_for(document, payloads)
    db = tmp_path / "shuffler.db"
    with ShufflerStorage(db) as storage:
        reports = [(secrets.token_hex(16), e["key_id"], e["sealed"]) for e in envelopes]
        assert storage.accept("crashy", document["config_id"], reports) == (n, 0)

    first = Forwarder(str(db), collector.url, TOKEN, max_request_bytes=400_000)
    recorded = first.storage.batch_sent

    def crash_after_the_first_part(batch_id: str, sent: int) -> None:
        if sent > 0:  # the collector stored the part; the shuffler dies before noting it
            raise RuntimeError("killed")
        recorded(batch_id, sent)

    first.storage.batch_sent = crash_after_the_first_part  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="killed"):
            first.run_once()
    finally:
        first.close()
    assert 0 < len(stored_ids(collector.db, "crashy")) < n

    again = Forwarder(str(db), collector.url, TOKEN)  # a fresh limit: the whole would fit it
    try:
        # Rounds as the forwarder's loop runs them: one the collector does not acknowledge
        # (busy, or slower than the request timeout under load) is retried, never lost.
        acknowledged, deadline = 0, time.monotonic() + 120
        while again.storage.open_batches():
            assert time.monotonic() < deadline, (
                f"the batch was never acknowledged: {batch_statuses(collector)}"
            )
            acknowledged += again.run_once()
        assert acknowledged == 1
    finally:
        again.close()
    stored = stored_ids(collector.db, "crashy")
    assert len(stored) == len(set(stored)) == n
    conn = sqlite3.connect(collector.db)
    try:
        (row,) = conn.execute(
            "SELECT size, total FROM batches b JOIN campaigns c ON c.id = b.campaign_id "
            "WHERE c.name = 'crashy'"
        ).fetchall()
    finally:
        conn.close()
    assert row == (n, n)  # the part sent twice added no size the second time
