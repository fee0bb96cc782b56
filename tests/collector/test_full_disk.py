"""``/readyz`` on a full disk (a real collector on a 16 MiB tmpfs, filled to its last byte):
uploads get 503, and readiness says so too, instead of 200 from a probe the reused WAL absorbs;
once space is back, both recover."""

from __future__ import annotations

import secrets
from pathlib import Path

import requests

from collector.process import CollectorProcess
from tests.disk import fill, small_disk

CAMPAIGN = {
    "name": "full",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    "domain": ["a", "b"],
}


def upload(collector: CollectorProcess, config_id: str, n: int) -> requests.Response:
    reports = [{"id": secrets.token_hex(16), "payload": i % 2} for i in range(n)]
    return requests.post(
        f"{collector.url}/v1/campaigns/full/reports",
        json={"config_id": config_id, "reports": reports},
        timeout=30,
    )


def test_readyz_is_503_on_a_full_disk(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        collector = CollectorProcess(disk / "collector.db", workers=1, log_dir=tmp_path)
        collector.start()
        try:
            config_id = collector.create_campaign(CAMPAIGN)["config_id"]
            for _ in range(5):  # a WAL with room in it, as on a server that has been running
                assert upload(collector, config_id, 500).status_code == 200
            assert requests.get(f"{collector.url}/readyz", timeout=10).status_code == 200

            filler = fill(disk)
            statuses = [upload(collector, config_id, 2_000).status_code for _ in range(5)]
            assert statuses == [503] * 5
            ready = requests.get(f"{collector.url}/readyz", timeout=10)
            assert ready.status_code == 503, ready.text
            assert ready.headers["Content-Type"] == "application/problem+json"
            assert ready.json()["type"].endswith(":database-unavailable")
            assert "No space left on device" in ready.json()["detail"]

            filler.unlink()
            assert requests.get(f"{collector.url}/readyz", timeout=10).status_code == 200
            assert upload(collector, config_id, 2_000).status_code == 200
        finally:
            collector.stop()
