"""TelemetryClient against a real collector app over real HTTP (werkzeug server in a thread),
with failures injected in front of it to exercise retries, refusals and stale configs."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from werkzeug.serving import make_server

from client_sdk import TelemetryClient, mechanism_from_config
from client_sdk.client import (
    Campaign,
    CampaignChangedError,
    CampaignVerificationError,
    UploadError,
)
from client_sdk.outbox import Outbox
from client_sdk.protocol import campaign_config_id
from collector import create_app

TOKEN = "client-test-admin-token-0123456789"
LABELS = [f"label-{i}" for i in range(6)]
CAMPAIGN: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 1.5, "k": 6},
    "domain": LABELS,
}

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Faults:
    """WSGI middleware: answers the next scripted upload requests itself, counts attempts."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.script: list[tuple[int, dict[str, str], dict[str, Any]]] = []
        self.uploads = 0
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        is_upload = environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"].endswith(
            "/reports"
        )
        with self.lock:
            if is_upload:
                self.uploads += 1
            scripted = self.script.pop(0) if is_upload and self.script else None
        if scripted is None:
            return self.app(environ, start_response)
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        status, headers, body = scripted
        start_response(
            f"{status} Scripted",
            [("Content-Type", "application/problem+json"), *headers.items()],
        )
        return [json.dumps(body).encode()]


class Collector:
    def __init__(self, db: Path, **config: Any) -> None:
        self.db = db
        self.app = create_app(
            {"DB": str(db), "ADMIN_TOKEN": TOKEN, "SYNCHRONOUS": "NORMAL", **config}
        )
        self.faults = Faults(self.app.wsgi_app)
        self.app.wsgi_app = self.faults  # type: ignore[method-assign]
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def create(self, campaign: dict[str, Any]) -> dict[str, Any]:
        response = self.app.test_client().post(
            "/v1/campaigns", json=campaign, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert response.status_code in (200, 201), response.get_json()
        return dict(response.get_json())

    def stored(self) -> list[tuple[str, str]]:
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute("SELECT report_id, payload FROM reports ORDER BY seq").fetchall()
        finally:
            conn.close()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    server = Collector(tmp_path / "collector.db")
    server.create(CAMPAIGN)
    yield server
    server.stop()


@pytest.fixture
def client(collector: Collector, tmp_path: Path) -> Iterator[TelemetryClient]:
    with TelemetryClient(
        collector.url, state_dir=tmp_path / "device", backoff_factor=0.01, batch_size=40
    ) as c:
        yield c


def outbox_rows(state_dir: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(state_dir / "outbox.sqlite3")
    try:
        return conn.execute("SELECT * FROM outbox ORDER BY seq").fetchall()
    finally:
        conn.close()


# ---- campaigns ---------------------------------------------------------------------------------


def test_fetched_campaign_is_verified_and_cached_on_disk(
    collector: Collector, client: TelemetryClient, tmp_path: Path
) -> None:
    campaign = client.campaign("colors")
    assert isinstance(campaign, Campaign)
    assert campaign.mechanism == mechanism_from_config(CAMPAIGN["mechanism"])
    assert campaign.domain == tuple(LABELS)
    collector.stop()  # the cache on disk serves a restarted client without the network
    client.close()  # one client per state_dir
    with TelemetryClient(collector.url, state_dir=tmp_path / "device", retries=0) as again:
        assert again.campaign("colors") == campaign
    collector.server = make_server("127.0.0.1", 0, collector.app, threaded=True)
    collector.thread = threading.Thread(
        target=collector.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    collector.thread.start()


def tampered(document: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**document, **changes}


def test_campaign_documents_that_do_not_match_their_config_id_are_refused(
    collector: Collector,
) -> None:
    document = collector.create(CAMPAIGN)
    assert Campaign.from_document(document, name="colors").config_id == document["config_id"]
    stronger = {"mechanism": "grr", "epsilon": 5.0, "k": 6}
    cases = [
        (tampered(document, mechanism=stronger), "does not match its content"),
        (tampered(document, domain=list(reversed(LABELS))), "does not match its content"),
        (tampered(document, min_batch_size=1), "does not match its content"),
        (tampered(document, config_id="0" * 32), "does not match its content"),
        (tampered(document, name="other"), "asked for campaign"),
        ([], "not an object"),
        ({"name": "colors"}, "not a valid campaign"),
    ]
    # A document whose config_id matches but whose domain is inconsistent with the mechanism.
    short = LABELS[:3]
    cases.append(
        (
            tampered(
                document,
                domain=short,
                config_id=campaign_config_id(
                    mechanism=document["mechanism"], domain=short, policy=None, min_batch_size=100
                ),
            ),
            "domain must have k=6 labels",
        )
    )
    for bad, message in cases:
        with pytest.raises(CampaignVerificationError, match=message):
            Campaign.from_document(bad, name="colors")


def test_unknown_campaign_is_an_upload_error(client: TelemetryClient) -> None:
    """``campaign()`` raises; ``record()`` drops the value, counts it and says why."""
    with pytest.raises(UploadError, match="HTTP 404") as info:
        client.campaign("absent")
    assert info.value.status == 404
    assert info.value.problem is not None and info.value.problem["type"].endswith("not-found")
    assert client.record("absent", "x") is None
    status = client.status()
    assert status["dropped"] == {"absent": {"campaign-unavailable": 1}}
    assert status["last_error"]["status"] == 404 and status["queued"] == {}


# ---- recording ---------------------------------------------------------------------------------


def test_record_queues_only_the_randomized_report(collector: Collector, tmp_path: Path) -> None:
    state = tmp_path / "seeded"
    values = [LABELS[i % 6] for i in range(50)]
    with TelemetryClient(collector.url, state_dir=state, rng=np.random.default_rng(7)) as c:
        ids = [c.record("colors", values[0])]
        c.record_many("colors", values[1:])
        assert c.pending("colors") == 50
        ids_queued = c.pending_ids()
        rows = outbox_rows(state)  # before close, which flushes them
    assert ids[0] in ids_queued and all(len(i) == 32 for i in ids_queued)
    # The queued payloads are exactly the mechanism's randomization of the label indices.
    mechanism = mechanism_from_config(CAMPAIGN["mechanism"])
    rng = np.random.default_rng(7)
    expected = mechanism.to_wire(mechanism.perturb([0], rng=rng)) + mechanism.to_wire(
        mechanism.perturb(np.arange(1, 50) % 6, rng=rng)
    )
    assert [json.loads(r[4]) for r in rows] == expected
    assert {r[1] for r in rows} == {"colors"}
    # Nothing in the outbox table is a label (the raw value never touches the disk there).
    assert not any(label in str(row) for row in rows for label in LABELS)


def test_unknown_label_is_a_value_error_and_queues_nothing(client: TelemetryClient) -> None:
    with pytest.raises(ValueError, match=r"position 0 .*not a label of campaign 'colors'") as e:
        client.record("colors", "purple")
    assert "purple" not in str(e.value)  # error messages reach logs: the value is not echoed
    with pytest.raises(ValueError, match=r"position 2"):
        client.record_many("colors", [LABELS[0], LABELS[1], 3, LABELS[2]])
    assert client.pending() == 0
    assert client.record_many("colors", []) == []


# ---- flushing ----------------------------------------------------------------------------------


def test_flush_uploads_everything_in_batches_and_empties_the_outbox(
    collector: Collector, client: TelemetryClient
) -> None:
    ids = {client.record("colors", LABELS[1])}
    many = client.record_many("colors", [LABELS[i % 6] for i in range(99)])
    assert len(set(many)) == 99
    ids |= set(many)
    assert ids == client.pending_ids()
    assert client.flush() == 100
    assert client.pending() == 0
    assert collector.faults.uploads == 3  # batches of 40
    assert {r[0] for r in collector.stored()} == ids
    assert client.flush() == 0


def test_retries_on_503_429_and_5xx_honouring_retry_after(
    collector: Collector, client: TelemetryClient
) -> None:
    client.record_many("colors", LABELS * 5)
    busy = {"type": "urn:ldp-telemetry:problem:overloaded", "status": 503, "detail": "busy"}
    collector.faults.script = [
        (503, {"Retry-After": "1"}, busy),
        (429, {"Retry-After": "0"}, busy),
        (500, {}, busy),
        (502, {}, busy),
    ]
    started = time.monotonic()
    assert client.flush() == 30
    assert time.monotonic() - started >= 0.9  # the Retry-After of 1 s was honoured
    assert collector.faults.uploads == 5
    assert len(collector.stored()) == 30


def test_other_4xx_are_not_retried_and_keep_the_reports(
    collector: Collector, client: TelemetryClient
) -> None:
    client.record_many("colors", LABELS)
    problem = {"type": "urn:ldp-telemetry:problem:malformed-request", "status": 400, "detail": "no"}
    collector.faults.script = [(400, {}, problem)]
    assert client.flush() == 0
    error = client.status()["last_error"]
    assert error["status"] == 400 and "HTTP 400: no" in error["message"]
    assert collector.faults.uploads == 1
    assert client.pending() == 6
    assert client.flush(force=True) == 6


def test_network_errors_are_retried_then_reported_and_nothing_is_lost(
    collector: Collector, tmp_path: Path
) -> None:
    state = tmp_path / "offline"
    with TelemetryClient(collector.url, state_dir=state) as online:
        online.campaign("colors")  # cached while online
    with TelemetryClient(
        "http://127.0.0.1:9", state_dir=state, retries=2, backoff_factor=0.01
    ) as offline:
        offline.record_many("colors", LABELS)
        assert offline.flush() == 0
        assert "failed after retries" in offline.status()["last_error"]["message"]
        assert offline.pending() == 6
    with TelemetryClient(collector.url, state_dir=state) as back_online:
        assert back_online.flush() == 6
    assert len(collector.stored()) == 6


def test_a_lost_acknowledgement_is_a_duplicate_not_a_second_report(
    collector: Collector, client: TelemetryClient, tmp_path: Path
) -> None:
    client.record_many("colors", LABELS * 3)
    queued = outbox_rows(tmp_path / "device")
    assert client.flush() == 18
    # As if the process died after the collector committed but before the outbox delete.
    outbox = Outbox(tmp_path / "device")
    try:
        outbox.append("colors", queued[0][2], [(row[3], row[4]) for row in queued])
    finally:
        outbox.close()
    assert client.pending() == 18
    assert client.flush() == 18  # acknowledged as duplicates
    assert client.pending() == 0
    assert len(collector.stored()) == 18


def test_rejected_reports_are_dropped_with_a_logged_reason(
    collector: Collector, client: TelemetryClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client.record_many("colors", LABELS)
    config_id = client.campaign("colors").config_id
    outbox = Outbox(tmp_path / "device")
    try:
        outbox.append("colors", config_id, [("f" * 32, "17")])
    finally:
        outbox.close()
    with caplog.at_level(logging.WARNING, logger="client_sdk.client"):
        assert client.flush() == 6
    assert client.pending() == 0
    assert "rejected and dropped" in caplog.text and "[0, 6)" in caplog.text
    assert len(collector.stored()) == 6


def test_a_lower_batch_cap_on_the_collector_splits_batches(tmp_path: Path) -> None:
    server = Collector(tmp_path / "capped.db", MAX_BATCH=15)
    try:
        server.create(CAMPAIGN)
        with TelemetryClient(server.url, state_dir=tmp_path / "d", batch_size=40) as c:
            c.record_many("colors", LABELS * 10)
            assert c.flush() == 60
        assert len(server.stored()) == 60
    finally:
        server.stop()


def test_a_changed_campaign_is_refused_until_accepted_then_old_reports_are_dropped(
    collector: Collector, client: TelemetryClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client.record_many("colors", LABELS)
    old = client.campaign("colors").config_id
    # The collector's database is replaced by one where "colors" has another config.
    replacement = Collector(tmp_path / "replacement.db")
    try:
        changed = dict(CAMPAIGN, mechanism={"mechanism": "grr", "epsilon": 0.5, "k": 6})
        new = replacement.create(changed)["config_id"]
        assert new != old
        client.base_url = replacement.url
        # A changed campaign is refused until the app accepts it; the queue is kept meanwhile.
        assert client.flush() == 0  # reported in status(), never raised into the app
        status = client.status()
        assert status["changed_campaigns"] == {"colors": {"accepted": old, "served": new}}
        assert status["last_error"]["type"] == "CampaignChangedError"
        assert client.pending() == 6 and replacement.stored() == []
        with pytest.raises(CampaignChangedError):
            client.campaign("colors")
        assert client.record("colors", LABELS[0]) is None
        assert client.status()["dropped"] == {"colors": {"campaign-changed": 1}}
        assert any("campaign changed" in (e.event or "") for e in client.privacy_log("colors"))
        assert client.accept_campaign_change("colors").config_id == new
        with caplog.at_level(logging.WARNING, logger="client_sdk.client"):
            assert client.flush(force=True) == 0
        assert "dropped 6 queued reports made under another config" in caplog.text
        assert client.campaign("colors").config_id == new
        assert client.pending() == 0 and replacement.stored() == []
        client.record_many("colors", LABELS)
        assert client.flush() == 6
        assert len(replacement.stored()) == 6
    finally:
        replacement.stop()


def test_threads_share_a_client_safely(collector: Collector, client: TelemetryClient) -> None:
    errors: list[BaseException] = []
    acknowledged: list[int] = []

    def device(worker: int) -> None:
        try:
            for i in range(10):
                client.record_many("colors", [LABELS[(worker + i) % 6]] * 20)
                if i % 3 == 0:
                    acknowledged.append(client.flush())
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=device, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    acknowledged.append(client.flush())
    stored = collector.stored()
    assert sum(acknowledged) == len(stored) == 6 * 10 * 20
    assert len({r[0] for r in stored}) == len(stored)
    assert client.pending() == 0


def test_numeric_campaigns_take_numbers(collector: Collector, tmp_path: Path) -> None:
    collector.create(
        {
            "name": "latency",
            "mechanism": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0.0, "upper": 100.0},
        }
    )
    with TelemetryClient(collector.url, state_dir=tmp_path / "n") as c:
        assert c.campaign("latency").domain is None
        c.record("latency", 12.5)
        c.record_many("latency", [1, 2.5, 99.0])
        for bad in ("fast", True, None, float("nan"), [1, None]):
            with pytest.raises(ValueError, match=r"must be a (finite )?number"):
                c.record("latency", bad)
        assert c.pending() == 4
        assert c.flush() == 4
    assert len(collector.stored()) == 4
