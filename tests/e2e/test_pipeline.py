"""End to end over real HTTP: a gunicorn collector process, TelemetryClients uploading, and the
analysis estimate (``analysis.estimate`` over ``iter_report_chunks``) against the truth."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from analysis import estimate
from analysis.dataset import count_reports, iter_report_chunks, load_campaign
from analysis.demo import default_mechanism, zipf_population
from client_sdk import TelemetryClient
from collector.process import CollectorProcess
from tests.e2e.conftest import stored_ids
from tests.stats import assert_within_z

K = 20
DEVICES = 20_000
LABELS = [f"app-{i:02d}" for i in range(K)]


def test_fleet_estimates_agree_with_the_truth(collector: CollectorProcess, tmp_path: Path) -> None:
    name = "e2e-apps"
    config = {"mechanism": default_mechanism(), "epsilon": 2.0, "k": K}
    collector.create_campaign({"name": name, "mechanism": config, "domain": LABELS})
    values = zipf_population(DEVICES, K, seed=11)
    shards = np.array_split(values, 2)
    acknowledged: list[int] = []

    def shard(index: int) -> None:
        with TelemetryClient(
            collector.url,
            state_dir=tmp_path / f"client-{index}",
            rng=np.random.default_rng(100 + index),
        ) as client:
            client.record_many(name, [LABELS[v] for v in shards[index]])
            acknowledged.append(client.flush())

    threads = [threading.Thread(target=shard, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(acknowledged) == DEVICES

    db = collector.db
    campaign = load_campaign(db, name)
    assert count_reports(db, name) == DEVICES
    est = estimate(campaign.mechanism, iter_report_chunks(db, name, chunk_size=3_000))
    truth = np.bincount(values, minlength=K) / DEVICES
    assert est.n == DEVICES
    # Exact standard errors at the truth (z = 5.5: a false alarm about once in 2.5e7 per item).
    exact_se = np.sqrt(campaign.mechanism.variance(DEVICES, truth))  # type: ignore[attr-defined]
    assert_within_z(est.frequencies, truth, exact_se, what="e2e frequencies")
    covered = (est.ci_low <= truth) & (truth <= est.ci_high)
    assert covered.sum() >= 15, f"only {covered.sum()} of {K} 95% intervals cover the truth"

    # The collector's admin estimate is the same computation.
    admin = requests.get(
        f"{collector.url}/v1/campaigns/{name}/estimate", headers=collector.admin(), timeout=30
    ).json()
    np.testing.assert_allclose([i["frequency"] for i in admin["items"]], est.frequencies)
    np.testing.assert_allclose([i["std_error"] for i in admin["items"]], est.std_errors)

    # The NDJSON export, paged by its cursor, returns every stored report once.
    exported: list[dict[str, Any]] = []
    url: str | None = f"{collector.url}/v1/campaigns/{name}/reports?limit=7000"
    while url:
        response = requests.get(url, headers=collector.admin(), timeout=30)
        assert response.status_code == 200
        exported += [json.loads(line) for line in response.text.splitlines()]
        link = response.links.get("next")
        url = f"{collector.url}{link['url']}" if link else None
    assert sorted(r["id"] for r in exported) == sorted(stored_ids(db, name))

    metrics = requests.get(f"{collector.url}/metrics", timeout=10).text
    assert f'ldp_reports_accepted_total{{campaign="{name}"}} {DEVICES}' in metrics


def test_ldp_demo_runs_end_to_end(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from analysis.demo import main

    report = tmp_path / "demo.html"
    argv = ["--devices", "3000", "--clients", "2", "--mechanism", "grr", "--seed", "3"]
    assert main([*argv, "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "devices 3,000  stored 3,000  acknowledged 3,000" in out
    assert "coverage of the 95% intervals over all 100 items" in out
    assert out.count("item-0") >= 15
    # The gap to the central model, with the observed errors of both, and the report.
    assert "the gap to a trusted central curator" in out
    assert "price of locality" in out
    assert f"report written to {report}" in out
    page = report.read_text()
    assert page.count("data:image/png;base64,") >= 3
