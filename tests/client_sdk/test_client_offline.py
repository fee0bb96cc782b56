"""Calls that never throw for the network (issue 23, item 2), against a REAL collector process
(``collector.process.CollectorProcess``: gunicorn, SQLite) that is killed, restarted, and
fronted by a small real HTTP server that scripts its answers (503, 429 with ``Retry-After``,
408, 400, slowness) before forwarding to it.

Invariants checked by report id: no exception reaches the app, nothing queued is lost, and when
the collector answers again every recorded report is stored exactly once.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from client_sdk import CampaignVerificationError, PolicyViolation, PrivacyPolicy, TelemetryClient
from client_sdk.protocol import campaign_config_id
from collector.process import CollectorProcess
from tests.e2e.conftest import stored_ids

LABELS = [f"label-{i}" for i in range(6)]
COLORS: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 6},
    "domain": LABELS,
}
MINUTES: dict[str, Any] = {
    "name": "minutes",
    "mechanism": {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 240},
}


class Gate:
    """A real HTTP server in front of the collector: answers from ``script`` first (one entry
    per request: ``(status, headers, body)``, or ``("slow", seconds)`` to forward late), then
    forwards. ``posts`` counts the upload requests it saw."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.script: list[tuple[Any, ...]] = []
        self.always: tuple[Any, ...] | None = None
        self.posts = 0
        self.lock = threading.Lock()
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def _answer(self, method: str) -> None:
                # The client may have given up first (the slow case).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._forward_or_script(method)

            def _forward_or_script(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with gate.lock:
                    if method == "POST":
                        gate.posts += 1
                    step = gate.script.pop(0) if gate.script else gate.always
                if step is not None and step[0] == "slow":
                    time.sleep(step[1])
                    step = None
                if step is not None:
                    status, headers, problem = step
                    data = json.dumps(problem).encode()
                    self.send_response(status)
                    for key, value in {
                        "Content-Type": "application/problem+json",
                        **headers,
                    }.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                try:
                    answer = requests.request(
                        method,
                        gate.upstream + self.path,
                        data=body or None,
                        headers={"Content-Type": self.headers.get("Content-Type", "")},
                        timeout=30,
                    )
                except requests.RequestException:
                    self.send_response(502)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", ""))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def problem(status: int, kind: str = "overloaded") -> dict[str, Any]:
    return {"type": f"urn:ldp-telemetry:problem:{kind}", "status": status, "detail": kind}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("collector")
    with CollectorProcess(root / "collector.db", workers=1) as process:
        process.create_campaign(COLORS)
        process.create_campaign(MINUTES)
        yield process


@pytest.fixture
def gate(collector: CollectorProcess) -> Iterator[Gate]:
    front = Gate(collector.url)
    yield front
    front.close()


def served(collector: CollectorProcess, name: str) -> dict[str, Any]:
    document = requests.get(f"{collector.url}/v1/campaigns/{name}", timeout=10).json()
    assert isinstance(document, dict)
    return document


def percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def test_down_then_killed_and_restarted_everything_arrives_exactly_once(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    """The collector is SIGKILLed before the device ever reached it: the pinned document is used
    offline, an unpinned campaign's values are dropped and counted (never stored), record() does
    not wait on the network, flush() raises nothing; after the restart all arrive once."""
    pinned = served(collector, "colors")
    before = len(stored_ids(collector.db, "colors"))
    collector.kill()
    try:
        with TelemetryClient(
            collector.url, state_dir=tmp_path / "d", campaigns=[pinned], flush_deadline=2
        ) as client:
            latencies: list[float] = []
            ids: list[str] = []
            for i in range(300):
                started = time.perf_counter()
                report_id = client.record("colors", LABELS[i % 6])
                latencies.append(time.perf_counter() - started)
                assert report_id is not None
                ids.append(report_id)
            unpinned: list[float] = []
            for _ in range(50):
                started = time.perf_counter()
                assert client.record("minutes", 12.0) is None  # neither pinned nor cached
                unpinned.append(time.perf_counter() - started)
            figures = [
                percentile(samples, q) * 1e3 for samples in (latencies, unpinned) for q in (50, 99)
            ]
            print(
                "\nrecord() with the collector down: pinned p50 {:.3f} ms, p99 {:.3f} ms; "
                "unpinned (dropped) p50 {:.3f} ms, p99 {:.3f} ms".format(*figures)
            )
            # Generous bound for 2 shared cores: a network wait (retries, backoff) is seconds.
            assert percentile(latencies, 99) < 0.25
            assert percentile(unpinned[1:], 99) < 0.05  # after the first refused connection
            started = time.monotonic()
            assert client.flush() == 0
            assert time.monotonic() - started < 5
            status = client.status()
            assert status["queued"] == {"colors": 300}
            assert status["dropped"] == {"minutes": {"campaign-unavailable": 50}}
            assert status["last_error"]["campaign"] == "colors"
            assert status["next_attempt"] > time.time()
            assert client.flush() == 0  # within the backoff: not even tried
            assert client.pending() == 300
            # No raw value anywhere in what status() says.
            assert not any(label in json.dumps(status) for label in LABELS)
            collector.start()
            assert client.flush(force=True) == 300
            assert client.status()["queued"] == {}
            assert client.status()["next_attempt"] is None
    finally:
        if collector.process is None or collector.process.poll() is not None:
            collector.start()
    stored = stored_ids(collector.db, "colors")
    assert len(stored) == before + 300
    assert set(ids) <= set(stored) and len(set(stored)) == len(stored)


def test_503_and_429_with_retry_after_are_honoured_and_nothing_is_lost(
    collector: CollectorProcess, gate: Gate, tmp_path: Path
) -> None:
    with TelemetryClient(gate.url, state_dir=tmp_path / "d", flush_deadline=3) as client:
        ids = client.record_many("colors", LABELS * 5)
        # 429 with Retry-After: 1 inside the deadline: waited, then delivered in the same flush.
        gate.script = [(429, {"Retry-After": "1"}, problem(429, "rate-limited"))]
        started = time.monotonic()
        assert client.flush() == 30
        assert time.monotonic() - started >= 0.9
        assert gate.posts == 2
        # 503 with a Retry-After past the deadline: not waited, kept, and the next flush is
        # not tried before it.
        more = client.record_many("colors", LABELS * 2)
        gate.always = (503, {"Retry-After": "30"}, problem(503))
        started = time.monotonic()
        assert client.flush() == 0
        assert time.monotonic() - started < 3
        status = client.status()
        assert status["last_error"]["status"] == 503  # its Retry-After passes the deadline
        assert status["next_attempt"] >= time.time() + 25
        assert status["queued"] == {"colors": 12}
        posts = gate.posts
        assert client.flush() == 0 and gate.posts == posts  # the backoff holds
        gate.always = None
        assert client.flush(force=True) == 12
    stored = stored_ids(collector.db, "colors")
    assert set(ids + more) <= set(stored) and len(set(stored)) == len(stored)


def test_slow_past_the_deadline_then_delivered_exactly_once(
    collector: CollectorProcess, gate: Gate, tmp_path: Path
) -> None:
    """The collector stores the batch after the client gave up; the retry is a duplicate."""
    with TelemetryClient(
        gate.url, state_dir=tmp_path / "d", flush_deadline=1.5, close_deadline=1.0
    ) as client:
        ids = client.record_many("colors", LABELS * 3)
        gate.script = [("slow", 3.0)]
        started = time.monotonic()
        assert client.flush() == 0
        assert time.monotonic() - started < 2.5
        assert client.pending() == 18
        assert "colors" in client.status()["last_error"]["message"]
        time.sleep(2.0)  # the slow request reaches the collector meanwhile
        assert client.flush(force=True) == 18  # acknowledged as duplicates
        assert client.pending() == 0
    stored = stored_ids(collector.db, "colors")
    assert set(ids) <= set(stored) and len(set(stored)) == len(stored)


def test_4xx_is_not_retried_but_408_is_and_the_reports_are_kept(
    collector: CollectorProcess, gate: Gate, tmp_path: Path
) -> None:
    with TelemetryClient(gate.url, state_dir=tmp_path / "d", flush_deadline=5) as client:
        ids = client.record_many("colors", LABELS)
        gate.script = [(400, {}, problem(400, "malformed-request"))]
        assert client.flush() == 0
        assert gate.posts == 1  # not retried
        assert client.status()["last_error"]["status"] == 400
        assert client.pending() == 6
        gate.script = [(408, {}, problem(408, "timeout"))]
        assert client.flush(force=True) == 6
        assert gate.posts == 3  # the 408 was retried
    stored = stored_ids(collector.db, "colors")
    assert set(ids) <= set(stored) and len(set(stored)) == len(stored)


def test_close_flushes_within_its_deadline(collector: CollectorProcess, tmp_path: Path) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "d") as client:
        ids = client.record_many("colors", LABELS)
    assert set(ids) <= set(stored_ids(collector.db, "colors"))  # leaving `with` flushed
    # With the collector unreachable, close gives up at its deadline and keeps the reports.
    state = tmp_path / "d"
    client = TelemetryClient("http://127.0.0.1:9", state_dir=state, close_deadline=1.0)
    kept = client.record_many("colors", LABELS)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 3
    with TelemetryClient(collector.url, state_dir=state) as again:
        assert again.pending_ids() == set(kept)


def test_out_of_range_numbers_are_clipped_counted_and_logged_once(
    collector: CollectorProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="client_sdk.client"),
        TelemetryClient(collector.url, state_dir=tmp_path / "d") as client,
    ):
        client.record("minutes", 500.25)
        client.record_many("minutes", [-3.5, 120.0, 240.0, 0.0])
        client.record("minutes", 987.75)
        status = client.status()
        assert status["clipped"] == {"minutes": 3}
        assert status["queued"] == {"minutes": 6}
    clip_logs = [r for r in caplog.records if "clipped" in r.getMessage()]
    assert len(clip_logs) == 1  # once per campaign per period
    assert "'minutes'" in clip_logs[0].getMessage()
    for value in ("500.25", "-3.5", "987.75"):
        assert value not in caplog.text


def test_pinned_documents_are_checked_at_construction_naming_the_field(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    document = served(collector, "colors")
    broken = {**document, "min_batch_size": "many"}
    with pytest.raises(CampaignVerificationError, match=r"campaigns\[1\]: campaign 'colors'"):
        TelemetryClient(collector.url, state_dir=tmp_path / "a", campaigns=[document, broken])
    with pytest.raises(CampaignVerificationError, match=r"campaigns\[0\]: .*'name'"):
        TelemetryClient(collector.url, state_dir=tmp_path / "b", campaigns=[{"domain": LABELS}])
    strict = PrivacyPolicy(max_epsilon=0.5)
    with pytest.raises(PolicyViolation, match="max_epsilon") as refused:
        TelemetryClient(
            collector.url, state_dir=tmp_path / "c", policy=strict, campaigns=[document]
        )
    assert refused.value.field == "max_epsilon"


def test_a_served_document_other_than_the_pinned_one_is_refused_never_swapped(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    served_document = served(collector, "colors")
    mechanism = {"mechanism": "grr", "epsilon": 0.5, "k": 6}
    pinned = {
        **served_document,
        "mechanism": mechanism,
        "config_id": campaign_config_id(
            mechanism=mechanism,
            domain=served_document.get("domain"),
            policy=served_document.get("policy"),
            min_batch_size=served_document["min_batch_size"],
            shuffle=served_document.get("shuffle"),
        ),
    }
    with TelemetryClient(
        collector.url, state_dir=tmp_path / "d", campaigns=[pinned], close_deadline=1.0
    ) as client:
        assert client.record("colors", LABELS[0]) is not None  # offline-capable: no fetch
        assert client.flush() == 0  # stale config -> refetch -> another config_id: refused
        status = client.status()
        assert status["changed_campaigns"] == {
            "colors": {"accepted": pinned["config_id"], "served": served_document["config_id"]}
        }
        assert status["queued"] == {"colors": 1}
        assert client.record("colors", LABELS[1]) is None
        assert client.status()["dropped"] == {"colors": {"campaign-changed": 1}}
        assert client.pending() == 1  # kept: the app decides (accept_campaign_change)


def test_policy_names_are_validated_against_the_registry_and_auto_is_understood(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"allowed_mechanisms: .*'OLH'.*did you mean 'olh'"):
        PrivacyPolicy(allowed_mechanisms=frozenset({"OLH"}))
    with pytest.raises(ValueError, match=r"allowed_mechanisms: .*'nope'"):
        PrivacyPolicy(allowed_mechanisms=frozenset({"grr", "nope"}))
    auto = PrivacyPolicy(allowed_mechanisms=frozenset({"auto"}))
    assert auto.allows("grr") and auto.allows("olh") and not auto.allows("laplace")
    colors, minutes = served(collector, "colors"), served(collector, "minutes")
    with TelemetryClient(
        collector.url, state_dir=tmp_path / "d", policy=auto, campaigns=[colors]
    ) as client:
        assert client.record("colors", LABELS[2]) is not None
        with pytest.raises(PolicyViolation, match="'auto' allows what it may pick: grr") as no:
            client.record("minutes", 3.0)
        assert no.value.field == "allowed_mechanisms"
    with pytest.raises(PolicyViolation, match="allowed_mechanisms"):
        TelemetryClient(collector.url, state_dir=tmp_path / "e", policy=auto, campaigns=[minutes])
