"""The shuffler's /metrics come from the same module (``collector.metrics``): against a real
``ldp-shuffler serve`` with 2 gunicorn workers, requests sum exactly over both workers, hostile
paths make no new route labels, and the waiting work is there."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from collector.metrics import UNMATCHED
from collector.process import CollectorProcess
from shuffler.process import ShufflerProcess
from tests.collector.test_metrics import get_fresh_connection, samples

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shuffler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShufflerProcess]:
    root = tmp_path_factory.mktemp("shuffler-metrics")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as collector:
        process = ShufflerProcess(root / "shuffler.db", collector.url, workers=2, log_dir=root)
        process.start(timeout=60)
        try:
            yield process
        finally:
            process.stop()


def _scrape(shuffler: ShufflerProcess) -> list[tuple[str, dict[str, str], float]]:
    response = requests.get(f"{shuffler.url}/metrics", timeout=30)
    assert response.status_code == 200
    return samples(response.text)


def _requests(scraped: list[Any], route: str) -> dict[str, float]:
    return {
        labels["status"]: value
        for name, labels, value in scraped
        if name == "ldp_http_requests_total"
        and labels["app"] == "shuffler"
        and labels["route"] == route
    }


def test_shuffler_requests_sum_over_its_workers(shuffler: ShufflerProcess) -> None:
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(get_fresh_connection, [f"{shuffler.url}/readyz"] * 150))
    assert statuses == [200] * 150
    for _ in range(6):
        assert _requests(_scrape(shuffler), "/readyz") == {"200": 150}


def test_shuffler_labels_stay_bounded_and_work_is_shown(shuffler: ShufflerProcess) -> None:
    for i in range(20):
        requests.get(f"{shuffler.url}/v1/campaigns/x{i}/secret/{i}", timeout=30)
    scraped = _scrape(shuffler)
    routes = {labels["route"] for name, labels, _ in scraped if "route" in labels}
    assert routes <= {
        "/v1/campaigns/<name>/reports",
        "/healthz",
        "/readyz",
        "/metrics",
        UNMATCHED,
    }
    assert _requests(scraped, UNMATCHED) == {"404": 20}
    names = {name for name, _, _ in scraped}
    assert {"ldp_shuffler_in_flight_reports", "ldp_database_size_bytes"} <= names
    assert ("ldp_shuffler_in_flight_reports", {}, 0.0) in scraped
