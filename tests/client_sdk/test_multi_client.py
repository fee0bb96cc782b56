"""A multi-attribute campaign through the client: a device records a mapping attribute -> label;
a missing or unknown attribute or label is a ValueError, nothing is queued, nothing is echoed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from analysis.estimation import estimate
from client_sdk import TelemetryClient
from collector.storage import Storage
from tests.client_sdk.test_client import Collector

OS = ["android", "ios", "linux"]
CAMPAIGN = {
    "name": "devices",
    "mechanism": {
        "mechanism": "multi",
        "epsilon": 4.0,
        "protocol": "smp",
        "attributes": [{"name": "os", "k": 3, "labels": OS}, {"name": "tier", "k": 2}],
    },
}


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    server = Collector(tmp_path / "collector.db")
    server.create(CAMPAIGN)
    yield server
    server.stop()


def test_records_reach_the_collector_and_estimate(collector: Collector, tmp_path: Path) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "device", batch_size=200) as client:
        records = [{"os": OS[i % 3], "tier": i % 2} for i in range(60)]
        client.record_many("devices", records)
        client.flush()
        assert client.pending() == 0
    stored = [json.loads(payload) for _, payload in collector.stored()]
    assert len(stored) == 60
    # SMP's attribute is the device's, from its keyed source: the same in every report
    assert len({payload[0] for payload in stored}) == 1
    with Storage(collector.db, create=False) as storage:
        mechanism = storage.get_campaign("devices").mechanism
        result = estimate(mechanism, list(storage.iter_report_chunks("devices")))
    marginal = result.marginal("os")
    assert marginal.frequencies.shape == marginal.std_errors.shape == (3,)


def test_bad_records_queue_nothing_and_echo_nothing(collector: Collector, tmp_path: Path) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "device") as client:
        with pytest.raises(ValueError, match="misses attribute 'tier'"):
            client.record_many("devices", [{"os": "ios", "tier": 0}, {"os": "ios"}])
        with pytest.raises(ValueError, match="unknown attribute"):
            client.record("devices", {"os": "ios", "tier": 1, "country": "fr"})
        with pytest.raises(ValueError, match="attribute 'os'") as error:
            client.record("devices", {"os": "windows-secret", "tier": 1})
        assert "windows-secret" not in str(error.value)
        with pytest.raises(ValueError, match=r"attribute 'tier' \(a int\) must be an integer"):
            client.record("devices", {"os": "ios", "tier": 7})
        assert client.pending() == 0


FLAGS = {
    "name": "flags",
    "mechanism": {
        "mechanism": "fourier",
        "epsilon": 2.0,
        "attributes": [{"name": "wifi", "labels": ["off", "on"]}, {"name": "dark"}],
        "order": 2,
    },
    "policy": {"epsilon_per_report": 2.0, "reports_per_period": 100, "period_seconds": 86400},
}


def test_fourier_records_reach_the_collector_and_estimate(
    collector: Collector, tmp_path: Path
) -> None:
    collector.create(FLAGS)
    with TelemetryClient(collector.url, state_dir=tmp_path / "device", batch_size=200) as client:
        client.record_many("flags", [{"wifi": ["off", "on"][i % 2], "dark": 1} for i in range(40)])
        with pytest.raises(ValueError, match="unknown attribute"):
            client.record("flags", {"wifi": "on", "dark": 1, "os": "x"})
        with pytest.raises(ValueError, match="attribute 'wifi'") as error:
            client.record("flags", {"wifi": "maybe-secret", "dark": 1})
        assert "maybe-secret" not in str(error.value)
        client.flush()
        assert client.pending() == 0
        # the ledger: one charge of epsilon per report sent
        charged = [e.epsilon_charged for e in client.privacy_log("flags") if e.event is None]
        assert len(charged) == 40 and all(c == pytest.approx(2.0) for c in charged)
    stored = [json.loads(payload) for _, payload in collector.stored()][-40:]
    assert all(len(payload) == 2 and payload[1] in (0, 1) for payload in stored)
    # the sampled coefficient is the device's, from its keyed source: the same in every report
    assert len({payload[0] for payload in stored}) == 1
    with Storage(collector.db, create=False) as storage:
        mechanism = storage.get_campaign("flags").mechanism
        result = estimate(mechanism, list(storage.iter_report_chunks("flags")))
    assert result.marginal("dark", "wifi").frequencies.shape == (2, 2)
