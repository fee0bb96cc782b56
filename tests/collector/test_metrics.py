"""Prometheus metrics against a real gunicorn collector with 2 workers: every worker's requests
are counted whichever worker answers the scrape, exactly; histograms add up; hostile paths,
methods and campaign names make no new label values; a worker killed and restarted loses no
count; the metric files' folder is private to one server start and removed when it stops."""

from __future__ import annotations

import glob
import os
import signal
import socket
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from collector import create_app
from collector.metrics import UNMATCHED
from collector.process import CollectorProcess
from tests.collector.conftest import CAMPAIGN

pytestmark = pytest.mark.slow

ROUTE = "/v1/campaigns/<name>"


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def scrape(collector: CollectorProcess) -> list[tuple[str, dict[str, str], float]]:
    response = requests.get(f"{collector.url}/metrics", timeout=30)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


def requests_of(scraped: list[Any], route: str, method: str = "GET") -> dict[str, float]:
    """``ldp_http_requests_total`` of the collector's ``route`` by status."""
    return {
        labels["status"]: value
        for name, labels, value in scraped
        if name == "ldp_http_requests_total"
        and labels["route"] == route
        and labels["method"] == method
        and labels["app"] == "collector"
    }


def workers(collector: CollectorProcess) -> list[int]:
    assert collector.process is not None
    pid = collector.process.pid
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(p) for p in children.read().split()]


def metric_folder(collector: CollectorProcess) -> Path:
    """The server's folder of metric files: the ``ldp-metrics-*`` one holding its workers'."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = workers(collector)
        for folder in glob.glob(os.path.join(tempfile.gettempdir(), "ldp-metrics-*")):
            if any(Path(folder, f"counter_{pid}.db").exists() for pid in pids):
                return Path(folder)
        time.sleep(0.1)
    raise AssertionError("no metric folder holds this server's workers' files")


def get_fresh_connection(url: str) -> int:
    """One GET on a new TCP connection (so the kernel hands it to either worker)."""
    response = requests.get(url, headers={"Connection": "close"}, timeout=30)
    return response.status_code


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("metrics")
    process = CollectorProcess(root / "collector.db", workers=2, log_dir=root)
    process.start(timeout=60)
    try:
        process.create_campaign(CAMPAIGN)
        yield process
    finally:
        process.stop()


def test_requests_over_two_workers_sum_exactly(collector: CollectorProcess) -> None:
    url = f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}"
    before = requests_of(scrape(collector), ROUTE).get("200", 0.0)
    sent = 0
    with ThreadPoolExecutor(8) as pool:
        # Until both workers have answered some (each keeps its own file), at least 200.
        for _ in range(20):
            statuses = list(pool.map(get_fresh_connection, [url] * 100))
            assert statuses == [200] * 100
            sent += 100
            counted = {
                pid
                for pid in workers(collector)
                if (metric_folder(collector) / f"counter_{pid}.db").exists()
            }
            if sent >= 200 and len(counted) == 2:
                break
    assert len(counted) == 2, "gunicorn gave every connection to one worker"
    for _ in range(10):  # scrapes land on either worker: each must see the same total
        scraped = scrape(collector)
        assert requests_of(scraped, ROUTE) == {"200": before + sent}
        count = {
            name: value
            for name, labels, value in scraped
            if name.startswith("ldp_http_request_duration_seconds")
            and labels.get("route") == ROUTE
            and labels.get("method") == "GET"
            and "le" not in labels
        }
        assert count["ldp_http_request_duration_seconds_count"] == before + sent
        assert count["ldp_http_request_duration_seconds_sum"] > 0
        buckets = sorted(
            (float(labels["le"]), value)
            for name, labels, value in scraped
            if name == "ldp_http_request_duration_seconds_bucket"
            and labels["route"] == ROUTE
            and labels["method"] == "GET"
        )
        values = [value for _, value in buckets]
        assert values == sorted(values)  # cumulative
        assert buckets[-1] == (float("inf"), before + sent)


def test_statuses_are_counted_by_route_template(collector: CollectorProcess) -> None:
    before = requests_of(scrape(collector), ROUTE)
    for _ in range(3):
        assert requests.get(f"{collector.url}/v1/campaigns/absent-{_}", timeout=30).status_code
    after = requests_of(scrape(collector), ROUTE)
    assert after.get("404", 0) - before.get("404", 0) == 3
    assert after.get("200") == before.get("200")


def _raw(collector: CollectorProcess, request: bytes) -> bytes:
    host, port = collector.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_hostile_paths_methods_and_names_make_no_new_labels(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    def label_values(scraped: list[Any]) -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {"route": set(), "method": set(), "campaign": set()}
        for _, labels, _ in scraped:
            for key, values in seen.items():
                if key in labels:
                    values.add(labels[key])
        return seen

    base = collector.url
    hostile = [f"/x{i}/{'a' * 50}" for i in range(20)] + [
        "/v1/campaigns/../../etc/passwd",
        "/%00%ff",
        "/metrics/../../admin",
        "/v1/campaigns/" + "%22%7D%0A" * 5,
    ]
    for path in hostile:
        requests.get(base + path, timeout=30)
    for method in ("PROPFIND", "BREW", "DELETE"):
        requests.request(method, f"{base}/v1/campaigns/{CAMPAIGN['name']}/reports", timeout=30)
    evil = [f'evil-{i}"}} 1\n' for i in range(5)]
    for name in evil:
        requests.post(
            f"{base}/v1/campaigns/{urllib.parse.quote(name)}/reports",
            json={"config_id": "x", "reports": [{"id": "0" * 32, "payload": 1}]},
            timeout=30,
        )
    _raw(collector, b"GET /" + b"b" * 300 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    seen = label_values(scrape(collector))
    routes = seen["route"]
    assert UNMATCHED in routes
    app = create_app({"DB": str(tmp_path / "rules.db"), "ADMIN_TOKEN": "x" * 32})
    assert routes <= {rule.rule for rule in app.url_map.iter_rules()} | {UNMATCHED}
    assert all(
        route == UNMATCHED or (route.startswith("/") and "x0" not in route) for route in routes
    )
    assert not any("passwd" in r or "evil" in r or "bbb" in r for r in routes)
    assert seen["method"] <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"}
    assert "OTHER" in seen["method"]
    assert seen["campaign"] == {CAMPAIGN["name"]}  # only campaigns that exist are named
    # Every route label is a rule of the app (a bounded set), checked against a second round
    # of different hostile paths: the label set does not grow.
    for path in [f"/y{i}/{os.urandom(4).hex()}" for i in range(20)]:
        requests.get(base + path, timeout=30)
    assert label_values(scrape(collector))["route"] == routes


def test_pending_work_and_database_size(collector: CollectorProcess) -> None:
    scraped = scrape(collector)
    gauges = {(name, labels.get("campaign", labels.get("file"))): v for name, labels, v in scraped}
    name = CAMPAIGN["name"]
    assert gauges[("ldp_campaign_reports", name)] == 0
    assert gauges[("ldp_campaign_min_batch_size", name)] == CAMPAIGN["min_batch_size"]
    assert gauges[("ldp_campaign_withheld_reports", name)] == 0
    size = gauges[("ldp_database_size_bytes", "db")]
    assert size == os.path.getsize(collector.db) and size > 0


def test_a_killed_worker_loses_no_count(collector: CollectorProcess) -> None:
    url = f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}"
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(get_fresh_connection, [url] * 100)) == [200] * 100
    total = requests_of(scrape(collector), ROUTE)["200"]
    folder = metric_folder(collector)
    victim = workers(collector)[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = workers(collector)
        if victim not in alive and len(alive) == 2:
            break
        time.sleep(0.2)
    assert victim not in workers(collector) and len(workers(collector)) == 2
    for _ in range(6):
        assert requests_of(scrape(collector), ROUTE)["200"] == total
    assert (folder / f"counter_{victim}.db").exists()  # its answered requests stay counted


def test_a_worker_that_exits_gracefully_leaves_the_folder(collector: CollectorProcess) -> None:
    url = f"{collector.url}/v1/campaigns/{CAMPAIGN['name']}"
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(get_fresh_connection, [url] * 40)) == [200] * 40
    total = requests_of(scrape(collector), ROUTE)["200"]
    folder = metric_folder(collector)
    leaving = workers(collector)[0]
    os.kill(leaving, signal.SIGTERM)  # a graceful exit: SystemExit runs up the forked stack
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        leaving in workers(collector) or len(workers(collector)) != 2
    ):
        time.sleep(0.2)
    assert leaving not in workers(collector)
    assert folder.exists()
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(get_fresh_connection, [url] * 40)) == [200] * 40
    for _ in range(4):
        assert requests_of(scrape(collector), ROUTE)["200"] == total + 40


def test_the_folder_is_per_server_and_removed_on_stop(tmp_path: Path) -> None:
    first = CollectorProcess(tmp_path / "collector.db", workers=2, log_dir=tmp_path)
    first.start(timeout=60)
    try:
        for _ in range(5):
            assert requests.get(f"{first.url}/openapi.json", timeout=30).status_code == 200
        assert requests_of(scrape(first), "/openapi.json")["200"] >= 5
        folder = metric_folder(first)
        assert folder.stat().st_mode & 0o077 == 0  # private
    finally:
        first.stop()
    assert not folder.exists()
    with CollectorProcess(tmp_path / "collector.db", workers=2, log_dir=tmp_path) as second:
        scraped = scrape(second)
        # A fresh start counts from zero: nothing of the first server's requests is there.
        assert requests_of(scraped, "/openapi.json") == {}
        assert metric_folder(second) != folder


def test_the_flask_app_alone_counts_in_process(client: FlaskClient) -> None:
    def get(path: str) -> str:
        response = client.get(path)
        text = response.get_data(as_text=True)
        return text

    def count(scraped: list[Any], route: str, status: str) -> float:
        return requests_of(scraped, route).get(status, 0.0)

    before = samples(get("/metrics"))
    get("/healthz")
    get("/nowhere/at/all")
    after = samples(get("/metrics"))
    assert count(after, "/healthz", "200") - count(before, "/healthz", "200") == 1
    assert count(after, UNMATCHED, "404") - count(before, UNMATCHED, "404") == 1
    assert count(after, "/metrics", "200") - count(before, "/metrics", "200") == 1


def test_a_killed_servers_folder_is_removed_at_the_next_start(tmp_path: Path) -> None:
    crashed = CollectorProcess(tmp_path / "collector.db", workers=1, log_dir=tmp_path)
    crashed.start(timeout=60)
    requests.get(f"{crashed.url}/openapi.json", timeout=30)
    folder = metric_folder(crashed)
    crashed.kill()  # SIGKILL: no clean-up runs
    assert folder.exists()
    with CollectorProcess(tmp_path / "collector.db", workers=1, log_dir=tmp_path):
        assert not folder.exists()
