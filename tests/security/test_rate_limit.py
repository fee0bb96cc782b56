"""The rate limit is charged after validation: a junk flood to a campaign that does not exist
(or with a stale config, or with malformed reports) costs no tokens, so honest uploads pass."""

from __future__ import annotations

import secrets
import threading

import pytest
import requests

from tests.security.conftest import StartCollector, upload

CAMPAIGN = {
    "name": "flooded",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    "domain": ["a", "b"],
}


def honest(n: int) -> list[dict[str, object]]:
    return [{"id": secrets.token_hex(16), "payload": i % 2} for i in range(n)]


def test_a_junk_flood_does_not_starve_honest_uploads(
    start_collector: StartCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100 reports/s, a burst of one batch of 100: honest uploads of 20 every 0.2 s fit.
    monkeypatch.setenv("LDP_RATE_LIMIT", "100")
    monkeypatch.setenv("LDP_MAX_BATCH", "100")
    collector = start_collector(workers=1)
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    junk_bodies = [
        ("nope", {"config_id": config_id, "reports": honest(25)}),  # no such campaign
        ("flooded", {"config_id": "0" * 32, "reports": honest(25)}),  # stale config
        ("flooded", {"config_id": config_id, "reports": [{"id": "x", "payload": 9}] * 25}),
    ]
    stop = threading.Event()
    flooded = [0]

    def flood() -> None:
        with requests.Session() as session:
            while not stop.is_set():
                for name, body in junk_bodies:
                    session.post(f"{collector.url}/v1/campaigns/{name}/reports", json=body)
                    flooded[0] += 1

    flooder = threading.Thread(target=flood)
    flooder.start()
    try:
        statuses = []
        for round_ in range(15):
            # Right behind a junk upload (charged, it would take what has refilled since the
            # last round), as well as during the flood.
            name, body = junk_bodies[round_ % len(junk_bodies)]
            requests.post(f"{collector.url}/v1/campaigns/{name}/reports", json=body, timeout=30)
            statuses.append(upload(collector, "flooded", config_id, honest(20)).status_code)
            stop.wait(0.2)
    finally:
        stop.set()
        flooder.join()
    assert flooded[0] > 30  # the flood did run meanwhile
    assert statuses.count(200) == len(statuses), statuses


def test_a_client_bucket_waits_alone(
    start_collector: StartCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LDP_RATE_LIMIT", "1000")
    monkeypatch.setenv("LDP_RATE_BURST", "1000")  # the global bucket never refuses here
    monkeypatch.setenv("LDP_RATE_PER_BUCKET", "1")  # a key's holds one batch, 1 report/s
    monkeypatch.setenv("LDP_MAX_BATCH", "50")
    collector = start_collector(workers=1)
    config_id = collector.create_campaign(CAMPAIGN)["config_id"]
    chatty = {"Ldp-Rate-Bucket": "install-" + secrets.token_hex(8)}
    assert upload(collector, "flooded", config_id, honest(50), headers=chatty).status_code == 200
    refused = upload(collector, "flooded", config_id, honest(50), headers=chatty)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["type"].endswith("rate-limited")
    other = {"Ldp-Rate-Bucket": "install-" + secrets.token_hex(8)}
    assert upload(collector, "flooded", config_id, honest(50), headers=other).status_code == 200
