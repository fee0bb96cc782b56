"""Overload protection: the upload rate limit answers 429 with Retry-After and stores nothing."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from collector import create_app
from collector.ratelimit import TokenBucket, UploadLimiter
from collector.storage import Storage

TOKEN = "rate-limit-admin-token-0123456789"
CAMPAIGN = {
    "name": "c",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    "domain": ["a", "b"],
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_admits_the_burst_then_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 50, clock=clock)
    assert bucket.take(50) == 0.0
    assert bucket.take(20) == pytest.approx(2.0)  # 20 tokens at 10/s
    clock.now += 1.0
    assert bucket.take(20) == pytest.approx(1.0)  # 10 refilled, 10 missing; nothing taken
    clock.now += 1.0
    assert bucket.take(20) == 0.0
    clock.now -= 5.0  # a clock that goes back refills nothing and takes nothing
    assert bucket.take(1) == pytest.approx(0.1)
    clock.now += 1000.0
    assert bucket.take(50) == 0.0  # never more than the burst


@pytest.mark.parametrize(("rate", "burst"), [(0, 5), (-1, 5), (float("inf"), 5), (1, 0.5)])
def test_token_bucket_refuses_bad_parameters(rate: float, burst: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)


def test_an_upload_over_the_rate_is_429_with_retry_after_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    app = create_app(
        {
            "DB": str(db),
            "ADMIN_TOKEN": TOKEN,
            "MAX_BATCH": 50,
            "RATE_LIMIT": 1.0,
            "SYNCHRONOUS": "NORMAL",
        }
    )
    client = app.test_client()
    created = client.post(
        "/v1/campaigns", json=CAMPAIGN, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    config_id = created.get_json()["config_id"]

    def batch(size: int) -> dict[str, Any]:
        reports = [{"id": secrets.token_hex(16), "payload": i % 2} for i in range(size)]
        return {"config_id": config_id, "reports": reports}

    first = client.post("/v1/campaigns/c/reports", json=batch(50))
    assert first.status_code == 200 and first.get_json()["accepted"] == 50
    second = client.post("/v1/campaigns/c/reports", json=batch(30))
    assert second.status_code == 429
    assert second.content_type == "application/problem+json"
    assert second.get_json()["type"].endswith("rate-limited")
    assert 1 <= int(second.headers["Retry-After"]) <= 31
    with Storage(db, create=False) as storage:
        assert storage.count_reports("c") == 50


@pytest.mark.parametrize("value", ["-1", "fast", "inf"])
def test_a_bad_rate_limit_setting_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValueError, match="LDP_RATE_LIMIT"):
        create_app({"DB": str(tmp_path / "x.db"), "RATE_LIMIT": value})


def test_upload_limiter_charges_a_keyed_bucket_then_the_global_one() -> None:
    clock = FakeClock()
    limiter = UploadLimiter(100.0, 50, per_bucket=1.0, clock=clock)
    assert limiter.take(50, "device-a") == 0.0
    assert limiter.take(10, "device-a") == pytest.approx(10.0)  # a's bucket: 1 report/s
    assert limiter.take(0 + 50, "device-b") == pytest.approx(0.5)  # the global one is empty
    clock.now += 0.5
    assert limiter.take(50, "device-b") == 0.0
    assert limiter.take(1, None) == pytest.approx(0.01)  # unkeyed: the global bucket only


def test_upload_limiter_tracks_a_bounded_number_of_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("collector.ratelimit.MAX_TRACKED_BUCKETS", 3)
    clock = FakeClock()
    limiter = UploadLimiter(1e9, 10, per_bucket=1.0, clock=clock)
    for key in ("a", "b", "c", "d"):
        assert limiter.take(10, key) == 0.0
        clock.now += 1.0  # the global bucket refills at once, a key's by 1 report
    assert len(limiter._buckets) == 3
    assert limiter.take(10, "a") == 0.0  # "a" was evicted first: a fresh bucket
    assert limiter.take(10, "d") > 0  # "d" is still tracked and nearly empty
