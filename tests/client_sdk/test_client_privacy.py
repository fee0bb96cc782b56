"""TelemetryClient's privacy machinery over real HTTP: the on-device budget ledger, memoized
(longitudinal) campaigns and RAPPOR, wired through ``TelemetryClient._produce_reports``."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from client_sdk import TelemetryClient, mechanism_from_config
from client_sdk.budget import BudgetExceededError
from client_sdk.client import Campaign, memo_scope
from client_sdk.mechanisms.memoized_oracle import Memoized
from client_sdk.secrets_store import DeviceKeys, load_or_create_device_secret
from tests.client_sdk.test_client import LABELS, TOKEN, Collector

POLICY = {"epsilon_per_report": 1.5, "reports_per_period": 3, "period_seconds": 86400}
BUDGETED: dict[str, Any] = {
    "name": "budgeted",
    "mechanism": {"mechanism": "grr", "epsilon": 1.5, "k": 6},
    "domain": LABELS,
    "policy": POLICY,
}
MEMOIZED: dict[str, Any] = {
    "name": "memoized",
    "mechanism": {
        "mechanism": "grr",
        "epsilon": 1.0,
        "k": 6,
        "longitudinal": {"epsilon_permanent": 2.0},
    },
    "domain": LABELS,
    # Enough for exactly one distinct value's lifetime cost (epsilon_inf = 2).
    "policy": {"epsilon_per_report": 2.0, "reports_per_period": 1, "period_seconds": 86400},
}
RAPPOR_CAMPAIGN: dict[str, Any] = {
    "name": "homepage",
    "mechanism": {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.5, "p": 0.25, "q": 0.75},
    # The candidate list the analysis decodes against; devices may report any string.
    "domain": ["https://a.example/", "https://b.example/"],
}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    server = Collector(tmp_path / "collector.db")
    for campaign in (BUDGETED, MEMOIZED, RAPPOR_CAMPAIGN):
        server.create(campaign)
    yield server
    server.stop()


@pytest.fixture
def client(collector: Collector, tmp_path: Path) -> Iterator[TelemetryClient]:
    with TelemetryClient(collector.url, state_dir=tmp_path / "device", backoff_factor=0.01) as c:
        yield c


def test_the_ledger_refuses_over_budget_and_queues_nothing(client: TelemetryClient) -> None:
    client.record_many("budgeted", LABELS[:2])
    client.record("budgeted", LABELS[2])
    assert client.pending("budgeted") == 3
    with pytest.raises(BudgetExceededError, match="budgeted"):
        client.record("budgeted", LABELS[3])
    with pytest.raises(BudgetExceededError):
        client.record_many("budgeted", LABELS)  # all or nothing
    assert client.pending("budgeted") == 3
    status = client.budget_status("budgeted")
    assert status.spent_in_period == pytest.approx(4.5)
    assert status.limit_per_period == pytest.approx(4.5)
    assert status.charges_in_period == 3
    # The user-visible log: the three randomized reports that were queued, and their cost.
    log = client.privacy_log("budgeted")
    assert [entry.epsilon_charged for entry in log] == [1.5, 1.5, 1.5]
    queued = sorted(json.loads(p) for p in _outbox_payloads(client, "budgeted"))
    assert sorted(entry.report for entry in log) == queued
    assert client.flush() == 3


def test_memoized_campaign_charges_epsilon_inf_once_per_distinct_value(
    client: TelemetryClient, collector: Collector, tmp_path: Path
) -> None:
    mechanism = mechanism_from_config(MEMOIZED["mechanism"])
    assert getattr(mechanism, "epsilon_inf", None) == pytest.approx(2.0)
    for _ in range(40):  # repeats of one value cost nothing more
        client.record("memoized", LABELS[4])
    with pytest.raises(BudgetExceededError):
        client.record("memoized", LABELS[1])  # a second distinct value would cost 2 more
    log = client.privacy_log("memoized")
    assert len(log) == 40
    assert [e.epsilon_charged for e in log] == [2.0] + [0.0] * 39
    assert all(e.memoized_repeat for e in log[1:])
    assert client.flush() == 40
    # The device secret exists, is private to the user, and never left the device.
    secret = load_or_create_device_secret(tmp_path / "device")
    mode = stat.S_IMODE(os.stat(_secret_path(tmp_path / "device")).st_mode)
    assert mode == 0o600
    stored = "".join(payload for _, payload in collector.stored())
    assert secret.hex() not in stored


def test_memoized_reports_follow_one_permanent_response(
    collector: Collector, tmp_path: Path
) -> None:
    """Two clients on one device (same state_dir) share the permanent response of a value:
    the reported values concentrate on that response, not on the true value."""
    mechanism = mechanism_from_config(MEMOIZED["mechanism"])
    assert isinstance(mechanism, Memoized)
    # The same configuration without a budget, so that many reports can be drawn.
    collector.create({**MEMOIZED, "name": "memoized-free", "policy": None})
    state = tmp_path / "shared-device"
    with TelemetryClient(collector.url, state_dir=state) as c:
        c.record_many("memoized-free", [LABELS[2]] * 3000)
        payloads = [json.loads(p) for p in _outbox_payloads(c, "memoized-free")]
        memoized = c.campaign("memoized-free")
        assert isinstance(memoized, Campaign)
        scope = memo_scope("memoized-free", memoized.mechanism)
    with TelemetryClient(collector.url, state_dir=state) as again:
        again.record_many("memoized-free", [LABELS[2]] * 3000)  # after a restart
        payloads += [json.loads(p) for p in _outbox_payloads(again, "memoized-free")[-3000:]]
    secret = load_or_create_device_secret(state)
    permanent = int(
        mechanism.permanent_responses(np.array([2]), permanent=DeviceKeys(secret, scope))[0]
    )
    for half in (payloads[:3000], payloads[3000:]):
        counts = np.bincount(np.asarray(half), minlength=6)
        # The most frequent report is the permanent response, before and after the restart.
        assert int(np.argmax(counts)) == permanent


def test_rappor_campaign_reports_strings_and_flushes(
    client: TelemetryClient, collector: Collector
) -> None:
    client.record_many("homepage", ["https://a.example/", "https://b.example/"] * 5)
    client.record("homepage", "https://not-a-candidate.example/")
    assert client.flush() == 11
    stored = [json.loads(payload) for _, payload in collector.stored()]
    assert len(stored) == 11
    assert all(set(p) == {"cohort", "bits"} and len(p["bits"]) == 32 for p in stored)
    assert not any("example" in json.dumps(p) for p in stored)
    # Same client, same string: the same cohort every time (derived from the device secret).
    assert len({p["cohort"] for p in stored}) == 1


def test_a_policy_the_device_cannot_read_is_refused_at_creation(collector: Collector) -> None:
    response = collector.app.test_client().post(
        "/v1/campaigns",
        json={**BUDGETED, "name": "bad-policy", "policy": {"epsilon_per_report": -1}},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 400
    assert "policy" in response.get_json()["detail"]


def _outbox_payloads(client: TelemetryClient, campaign: str) -> list[str]:
    path = Path(client._state.path) / "outbox.sqlite3"
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT payload FROM outbox WHERE campaign = ? ORDER BY seq", (campaign,)
        ).fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]


def _secret_path(state_dir: Path) -> Path:
    candidates = [p for p in state_dir.iterdir() if "secret" in p.name]
    assert len(candidates) == 1, candidates
    return candidates[0]
