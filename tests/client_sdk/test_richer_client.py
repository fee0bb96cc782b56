"""Ranges (B-ary and Haar), key-value pairs (PCKV-GRR and -UE) and distributions (Square Wave)
through the whole system over real HTTP: the device records and its ledger charges every report,
the collector validates the wire and its admin estimate (``collector.estimates``, no
``analysis``) gives the numbers ``ldp-analyze`` gives; memoization is refused with its reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from analysis.estimation import estimate
from client_sdk import TelemetryClient, mechanism_from_config
from client_sdk.budget import BudgetExceededError
from collector.storage import Storage
from tests.client_sdk.test_client import TOKEN, Collector

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
POLICY = {"epsilon_per_report": 2.0, "reports_per_period": 300, "period_seconds": 86400}
BUCKETS = [f"{10 * i}-{10 * i + 9} ms" for i in range(12)]
CAMPAIGNS: list[dict[str, Any]] = [
    {
        "name": "haar",
        "mechanism": {"mechanism": "hierarchical", "epsilon": 2.0, "k": 12, "variant": "haar"},
        "domain": BUCKETS,
        "policy": POLICY,
    },
    {
        "name": "tree",
        "mechanism": {"mechanism": "hierarchical", "epsilon": 2.0, "k": 12},
        "domain": BUCKETS,
        "policy": POLICY,
    },
    {
        "name": "features",
        "mechanism": {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 2, "variant": "ue"},
        "policy": POLICY,
    },
    {
        "name": "features-grr",
        "mechanism": {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 2},
        "policy": POLICY,
    },
    {
        "name": "load",
        "mechanism": {
            "mechanism": "square_wave",
            "epsilon": 2.0,
            "lower": 0.0,
            "upper": 8.0,
            "bins": 16,
        },
        "policy": POLICY,
    },
]
N = 300


def values_of(name: str) -> list[Any]:
    rng = np.random.default_rng(4)
    if name in ("haar", "tree"):
        return [BUCKETS[int(i)] for i in np.minimum(rng.geometric(0.3, N) - 1, 11)]
    if name.startswith("features"):
        return [{0: 0.5, 2: -0.25} if i % 2 else {1: 1.0} for i in range(N)]
    return [float(v) for v in rng.uniform(1.0, 5.0, N)]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    root = tmp_path_factory.mktemp("richer")
    server = Collector(root / "collector.db")
    for campaign in CAMPAIGNS:
        server.create(campaign)
    with TelemetryClient(server.url, state_dir=root / "device", batch_size=100) as client:
        for campaign in CAMPAIGNS:
            client.record_many(campaign["name"], values_of(campaign["name"]))
            status = client.budget_status(campaign["name"])  # the ledger charged every report
            assert status.charges_in_period == N
            assert status.spent_in_period == pytest.approx(2.0 * N)
            with pytest.raises(BudgetExceededError):
                client.record_many(campaign["name"], values_of(campaign["name"])[:1])
        client.flush()
        assert client.pending() == 0
    yield server
    server.stop()


def stored(collector: Collector, name: str) -> tuple[Any, list[Any]]:
    with Storage(collector.db, create=False) as storage:
        mechanism = storage.get_campaign(name).mechanism
        return mechanism, list(storage.iter_report_chunks(name))


@pytest.mark.parametrize("name", ["haar", "tree"])
def test_range_campaign_admin_estimate_equals_the_analysis(collector: Collector, name: str) -> None:
    mechanism, chunks = stored(collector, name)
    assert sum(len(c) for c in chunks) == N
    levels = {int(level) for chunk in chunks for level in chunk["level"]}
    assert len(levels) == 1  # one level per device and campaign, from its keyed source
    expected = estimate(mechanism, chunks)
    response = requests.get(f"{collector.url}/v1/campaigns/{name}/estimate", headers=ADMIN)
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["n"] == N and [i["value"] for i in summary["items"]] == BUCKETS
    assert [i["frequency"] for i in summary["items"]] == pytest.approx(expected.frequencies)
    assert [i["std_error"] for i in summary["items"]] == pytest.approx(expected.std_errors)
    for row in summary["quantiles"]:
        assert row["value"] == expected.quantile(row["q"])
        assert [row["ci_low"], row["ci_high"]] == list(expected.quantile_interval(row["q"]))
    assert summary["variant"] == mechanism.description


@pytest.mark.parametrize("name", ["features", "features-grr"])
def test_key_value_admin_estimate_equals_the_analysis(collector: Collector, name: str) -> None:
    mechanism, chunks = stored(collector, name)
    expected = estimate(mechanism, chunks)
    summary = requests.get(f"{collector.url}/v1/campaigns/{name}/estimate", headers=ADMIN).json()
    keys = summary["keys"]
    assert [k["frequency"] for k in keys] == pytest.approx(expected.frequencies)
    assert [k["frequency_std_error"] for k in keys] == pytest.approx(expected.frequency_std_errors)
    assert [k["mean"] for k in keys] == pytest.approx(expected.means)
    assert [k["mean_std_error"] for k in keys] == pytest.approx(expected.mean_std_errors)


def test_distribution_admin_estimate_equals_the_analysis(collector: Collector) -> None:
    mechanism, chunks = stored(collector, "load")
    expected = estimate(mechanism, chunks)
    summary = requests.get(f"{collector.url}/v1/campaigns/load/estimate", headers=ADMIN).json()
    assert summary["mean"]["value"] == pytest.approx(expected.mean)
    assert summary["mean"]["std_error"] == pytest.approx(expected.mean_std_error)
    assert [b["frequency"] for b in summary["histogram"]] == pytest.approx(expected.histogram)
    for row in summary["quantiles"]:
        assert row["value"] == pytest.approx(expected.quantile(row["q"]))
    assert "ldp-analyze" in summary["intervals"]


MALFORMED: dict[str, tuple[list[Any], list[str]]] = {
    "haar": ([[0, 1], [2, 4], [1, 1, 1], [5, 0]], ["level must be", "[0, 4)", "payload", "level"]),
    "tree": ([[0, 1], [1, 99], "x"], ["level must be", "report must be", "payload"]),
    "features": ([5, ["AA"], ["AA", "!!"]], ["payload", "payload", "minus bits"]),
    "features-grr": ([12, -1, "3"], ["output", "output", "output"]),
    "load": ([-1, 10**9, 1.5], ["output", "output", "output"]),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_the_collector_rejects_malformed_reports_naming_each(
    collector: Collector, name: str
) -> None:
    document = requests.get(f"{collector.url}/v1/campaigns/{name}").json()
    payloads, reasons = MALFORMED[name]
    body = {
        "config_id": document["config_id"],
        "reports": [{"id": f"{i:032x}", "payload": p} for i, p in enumerate(payloads)],
    }
    response = requests.post(f"{collector.url}/v1/campaigns/{name}/reports", json=body)
    assert response.status_code == 200, response.text
    rejected = response.json()["rejected"]
    assert [r["index"] for r in rejected] == list(range(len(payloads)))
    for row, reason in zip(rejected, reasons, strict=True):
        assert reason in json.dumps(row), row


@pytest.mark.parametrize("name", ["haar", "features", "load"])
def test_memoization_is_refused_clearly(name: str) -> None:
    config = next(c["mechanism"] for c in CAMPAIGNS if c["name"] == name)
    with pytest.raises(ValueError, match=r"not one \(.*ledger charges each\)"):
        mechanism_from_config({**config, "longitudinal": {"epsilon_permanent": 4.0}})


def test_bad_records_queue_nothing(collector: Collector, tmp_path: Path) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "other") as client:
        with pytest.raises(ValueError, match="position 1 has a key outside"):
            client.record_many("features", [{0: 0.5}, {9: 0.5}])
        with pytest.raises(ValueError, match="must be in"):
            client.record("features", {1: 2.5})
        with pytest.raises(ValueError, match="haar"):
            client.record("haar", "not a bucket")
        assert client.pending() == 0
