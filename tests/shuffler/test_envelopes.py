"""Sealed envelopes cannot be replayed or moved (issue 21, item 3), against a real collector and
a real shuffler: the plaintext binds the campaign and its config id and carries a random nonce
the collector stores once per campaign, durably (``client_sdk.sealing``)."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.outbox import OUTBOX_FILE
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment
from tests.shuffler.test_e2e import CAMPAIGN, _wait_for, seal_for

MIN_BATCH = 100
SHUFFLE = {**CAMPAIGN["shuffle"], "min_batch": MIN_BATCH}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    deployment = Deployment(tmp_path_factory.mktemp("envelopes"), campaign=CAMPAIGN)
    deployment.start()
    try:
        yield deployment
    finally:
        deployment.stop()


def _campaign(deployment: Deployment, name: str) -> dict[str, Any]:
    return deployment.collector.create_campaign({**CAMPAIGN, "name": name, "shuffle": SHUFFLE})


def _upload(deployment: Deployment, name: str, config_id: str, envelopes: list[Any]) -> None:
    """Each envelope under a new device report id, to the shuffler."""
    body = {
        "config_id": config_id,
        "reports": [{"id": secrets.token_hex(16), "payload": e} for e in envelopes],
    }
    answer = requests.post(
        f"{deployment.shuffler.url}/v1/campaigns/{name}/reports", json=body, timeout=30
    )
    assert answer.status_code == 200 and answer.json()["accepted"] == len(envelopes)


def _batches(db: str, name: str) -> list[tuple[int, int, int]]:
    """``(size, accepted, duplicate)`` of each batch the collector received for ``name``."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT b.size, b.accepted, b.duplicate FROM batches b "
            "JOIN campaigns c ON c.id = b.campaign_id WHERE c.name = ? ORDER BY b.day",
            [name],
        ).fetchall()
    finally:
        conn.close()


def _metrics(deployment: Deployment) -> str:
    return requests.get(f"{deployment.collector.url}/metrics", timeout=10).text


def test_one_envelope_under_99_new_ids_is_stored_once_even_after_a_restart(
    deployment: Deployment,
) -> None:
    document = _campaign(deployment, "replayed")
    (envelope,) = seal_for(document, [2])
    _upload(deployment, "replayed", document["config_id"], [envelope] * MIN_BATCH)
    assert _wait_for(lambda: len(_batches(deployment.collector.db, "replayed")) == 1)
    assert stored_ids(deployment.collector.db, "replayed") != []
    assert len(stored_ids(deployment.collector.db, "replayed")) == 1
    # One new user, not 100: the batch's size for the central guarantee counts the one.
    assert _batches(deployment.collector.db, "replayed") == [(1, 1, MIN_BATCH - 1)]
    # The de-duplication is in the database: after a restart, the same envelope under 100
    # more new ids stores nothing.
    deployment.collector.restart()
    _upload(deployment, "replayed", document["config_id"], [envelope] * MIN_BATCH)
    assert _wait_for(lambda: len(_batches(deployment.collector.db, "replayed")) == 2)
    assert len(stored_ids(deployment.collector.db, "replayed")) == 1
    assert sorted(_batches(deployment.collector.db, "replayed")) == [
        (0, 0, MIN_BATCH),
        (1, 1, MIN_BATCH - 1),
    ]
    assert f'ldp_reports_duplicate_total{{campaign="replayed"}} {2 * MIN_BATCH - 1}' in (
        _metrics(deployment)
    )


def test_envelopes_sealed_for_one_campaign_are_refused_by_another(
    deployment: Deployment,
) -> None:
    a = _campaign(deployment, "campaign-a")
    b = _campaign(deployment, "campaign-b")
    assert a["config_id"] == b["config_id"]  # same content: only the name tells them apart
    moved = seal_for(a, [i % 4 for i in range(50)])
    honest = seal_for(b, [i % 4 for i in range(50)])
    _upload(deployment, "campaign-b", b["config_id"], moved + honest)
    assert _wait_for(lambda: len(_batches(deployment.collector.db, "campaign-b")) == 1)
    assert len(stored_ids(deployment.collector.db, "campaign-b")) == 50  # the honest ones
    assert _batches(deployment.collector.db, "campaign-b") == [(50, 50, 0)]
    metrics = _metrics(deployment)
    assert (
        'ldp_reports_rejected_total{campaign="campaign-b",reason="misdirected_envelope"} 50.0'
        in metrics
    )
    # The answer to the shuffler, as for any rejected report: the index, the code, the reason
    # naming the campaign it was sealed for. Sealed under another config id: refused the same.
    stale = seal_for(b, [1], config_id="0" * 32)
    body = {
        "batch_id": secrets.token_hex(16),
        "config_id": b["config_id"],
        "reports": [
            {"id": secrets.token_hex(16), "payload": e}
            for e in [*seal_for(a, [0]), *stale, *seal_for(b, [3] * (MIN_BATCH - 2))]
        ],
    }
    answer = requests.post(
        f"{deployment.collector.url}/v1/campaigns/campaign-b/batches",
        json=body,
        headers={"Authorization": f"Bearer {deployment.shuffler.token}"},
        timeout=30,
    ).json()
    assert answer["accepted"] == MIN_BATCH - 2
    assert [(r["index"], r["code"]) for r in answer["rejected"]] == [
        (0, "misdirected_envelope"),
        (1, "misdirected_envelope"),
    ]
    assert "sealed for campaign \"campaign-a\", not 'campaign-b'" in answer["rejected"][0]["reason"]
    assert "config_id" in answer["rejected"][1]["reason"]
    assert len(stored_ids(deployment.collector.db, "campaign-a")) == 0


def test_a_devices_retry_is_still_a_duplicate(deployment: Deployment, tmp_path: Path) -> None:
    """Through the SDK: the envelopes a device sealed at record time, replayed from its outbox
    under new ids after they were stored, are stored once each."""
    from client_sdk.client import TelemetryClient

    _campaign(deployment, "retried")
    labels = CAMPAIGN["domain"]
    with TelemetryClient(
        deployment.collector.url, state_dir=tmp_path / "d", shuffler_url=deployment.shuffler.url
    ) as client:
        client.record_many("retried", [labels[i % 4] for i in range(MIN_BATCH)])
        conn = sqlite3.connect(next((tmp_path / "d").rglob(OUTBOX_FILE)))
        rows = conn.execute("SELECT report_id, payload FROM outbox").fetchall()
        conn.close()
        assert client.flush() == MIN_BATCH
    assert _wait_for(lambda: len(stored_ids(deployment.collector.db, "retried")) == MIN_BATCH)
    document = requests.get(f"{deployment.collector.url}/v1/campaigns/retried", timeout=10).json()
    _upload(deployment, "retried", document["config_id"], [json.loads(p) for _, p in rows])
    assert _wait_for(lambda: len(_batches(deployment.collector.db, "retried")) == 2)
    assert len(stored_ids(deployment.collector.db, "retried")) == MIN_BATCH
