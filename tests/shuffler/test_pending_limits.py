"""Junk cannot fill the shuffler for good (real collector and shuffler processes): a report that
waited longer than ``--max-age`` is dropped and counted per campaign in ``/metrics``, and an
upload that would take a campaign beyond ``--max-pending`` waiting reports is refused with 503
problem+json before anything is stored or acknowledged."""

from __future__ import annotations

import base64
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from collector.process import CollectorProcess
from shuffler.process import ShufflerProcess

CAMPAIGN = {
    "name": "junked",
    "mechanism": {"mechanism": "grr", "k": 2},
    "domain": ["a", "b"],
    # never reached here: junk below min_batch used to wait forever
    "shuffle": {"min_batch": 1_000, "central_epsilon": 1.0, "delta": 1e-6},
}


class Stack:
    def __init__(self, root: Path) -> None:
        token = secrets.token_urlsafe(32)
        self.collector = CollectorProcess(root / "collector.db", workers=1, log_dir=root)
        self.collector.env["LDP_SHUFFLER_TOKEN"] = token
        self.collector.start()
        self.document = self.collector.create_campaign(CAMPAIGN)
        self.capped = ShufflerProcess(
            root / "capped.db",
            self.collector.url,
            token=token,
            workers=1,
            log_dir=root,
            extra_args=["--max-pending", "300"],
        ).start()
        self.aging = ShufflerProcess(
            root / "aging.db",
            self.collector.url,
            token=token,
            workers=1,
            log_dir=root,
            extra_args=["--max-age", "2"],
        ).start()

    def stop(self) -> None:
        self.capped.stop()
        self.aging.stop()
        self.collector.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("limits"))
    try:
        yield stack
    finally:
        stack.stop()


def junk(stack: Stack, n: int) -> list[dict[str, Any]]:
    """Well-formed envelopes no key opens (anyone can make them)."""
    key_id = stack.document["public_key"]["key_id"]
    return [
        {
            "id": secrets.token_hex(16),
            "payload": {
                "key_id": key_id,
                "sealed": base64.urlsafe_b64encode(secrets.token_bytes(112)).decode().rstrip("="),
            },
        }
        for _ in range(n)
    ]


def upload(stack: Stack, shuffler: ShufflerProcess, n: int) -> requests.Response:
    body = {"config_id": stack.document["config_id"], "reports": junk(stack, n)}
    return requests.post(f"{shuffler.url}/v1/campaigns/junked/reports", json=body, timeout=30)


def metric(shuffler: ShufflerProcess, name: str) -> float | None:
    text = requests.get(f"{shuffler.url}/metrics", timeout=10).text
    found = re.search(rf'^{name}\{{campaign="junked"\}} (\S+)$', text, re.MULTILINE)
    return None if found is None else float(found.group(1))


def test_an_upload_beyond_the_cap_is_refused_before_it_is_acknowledged(stack: Stack) -> None:
    assert upload(stack, stack.capped, 250).json()["accepted"] == 250
    refused = upload(stack, stack.capped, 51)
    assert refused.status_code == 503, refused.text
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert int(refused.headers["Retry-After"]) >= 1
    problem = refused.json()
    assert problem["type"].endswith(":overloaded")
    assert (problem["pending"], problem["max_pending"]) == (250, 300)
    assert "campaign 'junked' has 250 reports waiting" in problem["detail"]
    assert "--max-pending" in problem["detail"]
    assert metric(stack.capped, "ldp_shuffler_pending_reports") == 250  # nothing of it stored
    assert upload(stack, stack.capped, 50).json()["accepted"] == 50  # up to the cap exactly
    assert upload(stack, stack.capped, 1).status_code == 503
    assert metric(stack.capped, "ldp_shuffler_pending_reports") == 300


def test_reports_older_than_the_maximum_age_are_dropped_and_counted(stack: Stack) -> None:
    assert upload(stack, stack.aging, 150).json()["accepted"] == 150
    assert upload(stack, stack.aging, 70).json()["accepted"] == 70
    deadline = time.monotonic() + 120  # arrival is kept to the minute (rounded up), so 60-62 s
    while metric(stack.aging, "ldp_shuffler_expired_reports_total") != 220:
        assert time.monotonic() < deadline, "the waiting reports never expired"
        time.sleep(0.5)
    assert metric(stack.aging, "ldp_shuffler_pending_reports") is None  # none waits any more
    # The capped shuffler (default maximum age: a week) keeps its reports.
    assert metric(stack.capped, "ldp_shuffler_expired_reports_total") is None
