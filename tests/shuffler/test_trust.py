"""A collector that steers the shuffler (issue 21, item 1), against real processes: a real
collector, a real ``ldp-shuffler serve``, and between them a hostile collector
(``tests.shuffler.hostile``) that serves the shuffler a different document than devices get.

The shuffler recomputes ``config_id`` from the content (``shuffler.trust``), so a document whose
id does not match is refused, and it never forwards a batch below its operator's floor, whatever
``min_batch`` a document that does verify declares."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.protocol import problem_type
from collector.process import CollectorProcess
from shuffler.process import ShufflerProcess
from tests.shuffler.hostile import HostileCollector, recomputed
from tests.shuffler.test_e2e import _wait_for, oldest_waiting, seal_for

MIN_BATCH, FLOOR = 200, 50
CAMPAIGN = {
    "name": "steered",
    "mechanism": {"mechanism": "grr", "k": 4},
    "domain": ["a", "b", "c", "d"],
    "shuffle": {"min_batch": MIN_BATCH, "central_epsilon": 1.0, "delta": 1e-6},
}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CollectorProcess, Any]]:
    root = tmp_path_factory.mktemp("trust")
    process = CollectorProcess(root / "collector.db", workers=1, log_dir=root)
    with process:
        yield process, process.create_campaign(CAMPAIGN)


def _with_min_batch(document: dict[str, Any], min_batch: int) -> dict[str, Any]:
    return {**document, "shuffle": {**document["shuffle"], "min_batch": min_batch}}


def _upload(shuffler: str, document: dict[str, Any], n: int) -> requests.Response:
    """``n`` sealed reports under ``document``'s ``config_id``, in one upload."""
    envelopes = seal_for(document, [i % 4 for i in range(n)])
    body = {
        "config_id": document["config_id"],
        "reports": [{"id": secrets.token_hex(16), "payload": e} for e in envelopes],
    }
    return requests.post(f"{shuffler}/v1/campaigns/steered/reports", json=body, timeout=30)


def _waited(shuffler: str, name: str, seconds: float) -> bool:
    """Whether the oldest waiting report of ``name`` waits ``seconds`` longer than now, by the
    shuffler's clock (its forwarder going round every 0.1 s meanwhile), within a minute."""
    start = oldest_waiting(shuffler, name)
    return _wait_for(lambda: oldest_waiting(shuffler, name) >= start + seconds)


def _shuffler(root: Path, collector: str, **options: Any) -> ShufflerProcess:
    return ShufflerProcess(
        root / "shuffler.db", collector, workers=1, interval=0.1, log_dir=root, **options
    )


def test_a_document_whose_config_id_does_not_match_its_content_is_refused(
    collector: tuple[CollectorProcess, Any], tmp_path: Path
) -> None:
    """Before the fix the shuffler took a smaller ``min_batch`` under the devices' own
    ``config_id`` (with ``min_batch: 2`` it forwarded the 150 waiting reports at once; with 1,
    every report alone). Now uploads are refused (502 ``untrusted-campaign``), and reports
    accepted while the document was honest are not forwarded once it is not."""
    process, document = collector
    honest = {"served": True}

    def tamper(served: dict[str, Any]) -> dict[str, Any]:
        return served if honest["served"] else _with_min_batch(served, 2)

    with (
        HostileCollector(process.url, tamper) as hostile,
        _shuffler(tmp_path, hostile.url) as shuffler,
    ):
        assert _upload(shuffler.url, document, 150).json()["accepted"] == 150
        honest["served"] = False
        # The forwarder reads the document every round (0.1 s): 2 s of rounds by its clock.
        assert _waited(shuffler.url, document["name"], 2.0)
        assert hostile.received() == []
        shuffler.restart()  # a new app: its cache of the honest document is gone
        fresh = _upload(shuffler.url, document, 3)
        assert _waited(shuffler.url, document["name"], 1.0)
        assert hostile.received() == []
    assert fresh.status_code == 502
    assert fresh.headers["Content-Type"].startswith("application/problem+json")
    problem = fresh.json()
    assert problem["type"] == problem_type("untrusted-campaign")
    assert "does not match its content" in problem["detail"]


def test_the_floor_holds_against_a_document_that_verifies(
    collector: tuple[CollectorProcess, Any], tmp_path: Path
) -> None:
    """A hostile collector that recomputes the id of a document with ``min_batch: 2`` gets
    nothing below the operator's floor (50): 49 reports wait, the 50th makes a batch of 50.
    Reports under the devices' own ``config_id`` (whose ``min_batch`` is 200) are refused as
    stale: a report leaves only under the document its device accepted, so never in a batch
    below the ``min_batch`` its device was promised."""
    process, document = collector
    tampered = recomputed(_with_min_batch(document, 2))
    with (
        HostileCollector(process.url, lambda _: tampered) as hostile,
        _shuffler(tmp_path, hostile.url, min_batch_floor=FLOOR) as shuffler,
    ):
        stale = _upload(shuffler.url, document, 1)
        assert stale.status_code == 409
        assert stale.json()["type"] == problem_type("stale-config")
        assert _upload(shuffler.url, tampered, FLOOR - 1).json()["accepted"] == FLOOR - 1
        assert _waited(shuffler.url, tampered["name"], 2.0)
        assert hostile.received() == []
        assert _upload(shuffler.url, tampered, 1).json()["accepted"] == 1
        deadline = time.monotonic() + 60
        while not hostile.received() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hostile.received() == [FLOOR]
