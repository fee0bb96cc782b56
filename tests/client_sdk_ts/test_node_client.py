"""The TypeScript client in Node against a real collector process: a Node script using the built
package records values and flushes; the collector stores every report once, and the analysis
estimate from them matches the truth within its error bars."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis import estimate
from analysis.dataset import count_reports, iter_report_chunks, load_campaign
from collector.process import CollectorProcess
from tests.client_sdk_ts.conftest import DIST, WEIGHTS, require_node
from tests.stats import assert_within_z

DEVICES = 4000
HERE = Path(__file__).parent


def population(campaign: dict[str, Any], n: int) -> tuple[list[Any], np.ndarray]:
    """The values a fleet records (fixed, no randomness) and the truth the estimate must find."""
    domain = campaign.get("domain")
    if domain is not None:
        counts = [round(w * n) for w in WEIGHTS]
        values = [label for label, c in zip(domain, counts, strict=True) for _ in range(c)]
        return values, np.array(counts) / sum(counts)
    values = [2.0 + 6.0 * i / (n - 1) for i in range(n)]
    return values, np.array(np.mean(values))


def run_node(job: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run(
        [require_node(), str(HERE / "record_and_flush.mjs")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"the Node device failed:\n{result.stdout}\n{result.stderr}"
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def check_estimate(db: str, campaign: dict[str, Any], truth: np.ndarray, n: int) -> None:
    """Every stored report once, and the estimate within 5 standard errors of the truth."""
    name = campaign["name"]
    assert count_reports(db, name) == n
    spec = load_campaign(db, name)
    result = estimate(spec.mechanism, iter_report_chunks(db, name, chunk_size=5000))
    if campaign.get("domain") is not None:
        assert_within_z(result.frequencies, truth, result.std_errors, z=5.0, what="frequencies")
    else:
        assert_within_z(result.mean, truth, result.std_errors, z=5.0, what="mean")


def test_node_client_records_and_flushes_to_a_real_collector(
    ts_campaign: dict[str, Any], collector: CollectorProcess, tmp_path: Path
) -> None:
    served = collector.create_campaign(ts_campaign)
    values, truth = population(ts_campaign, DEVICES)
    job = {
        "package": str(DIST / "src" / "index.js"),
        "url": collector.url,
        "campaign": served["name"],
        "state": str(tmp_path / "device"),
        "values": values,
        "seed": "5a" * 32,
    }
    outcome = run_node(job)
    assert outcome["recorded"] == DEVICES, outcome
    assert outcome["acknowledged"] == DEVICES, outcome
    assert outcome["left"] == 0 and outcome["status"]["last_error"] is None, outcome
    # Only randomized reports were kept on the device: no label in its outbox or ledger.
    kept = "".join((tmp_path / "device" / f).read_text() for f in ("outbox.json", "ledger.json"))
    for label in ts_campaign.get("domain") or []:
        assert label not in kept
    check_estimate(collector.db, ts_campaign, truth, DEVICES)


MEMOIZED_DEVICES = 600
MEMOIZED = {
    "name": "ts-memo-theme",
    "mechanism": {
        "mechanism": "grr",
        "epsilon": 2.0,
        "k": 4,
        "longitudinal": {"epsilon_permanent": 4.0},
    },
    "domain": ["light", "dark", "system", "contrast"],
    "policy": {"epsilon_per_report": 2.0, "reports_per_period": 4, "period_seconds": 86400},
    "min_batch_size": 100,
}


def test_node_devices_record_a_memoized_campaign_to_a_real_collector(
    ts_build: Path, collector: CollectorProcess, tmp_path: Path
) -> None:
    """Memoized (longitudinal) grr from 600 Node devices, each with its own device secret: the
    client derives each permanent response from the keyed source, the ledger charges
    epsilon_inf, and the estimate of the composed channel finds the truth."""
    served = collector.create_campaign(MEMOIZED)
    values, truth = population(MEMOIZED, MEMOIZED_DEVICES)
    job = {
        "package": str(ts_build / "src" / "index.js"),
        "url": collector.url,
        "campaign": served["name"],
        "state": str(tmp_path / "device"),
        "values": values,
        "seed": "3c" * 32,
        "devices": True,
    }
    outcome = run_node(job)
    assert outcome["recorded"] == MEMOIZED_DEVICES, outcome
    assert outcome["acknowledged"] == MEMOIZED_DEVICES, outcome
    assert outcome["left"] == 0 and outcome["status"]["last_error"] is None, outcome
    check_estimate(collector.db, MEMOIZED, truth, MEMOIZED_DEVICES)


OS = ["android", "ios", "web"]
FLEETS: list[dict[str, Any]] = [
    {
        "name": "ts-multi",
        "mechanism": {
            "mechanism": "multi",
            "epsilon": 3.0,
            "protocol": "smp",
            "attributes": [
                {"name": "os", "k": 3, "labels": OS},
                {"name": "theme", "k": 2, "labels": ["light", "dark"]},
            ],
        },
        "min_batch_size": 100,
    },
    {
        "name": "ts-range",
        "mechanism": {"mechanism": "hierarchical", "epsilon": 3.0, "k": 4},
        "domain": ["light", "dark", "system", "contrast"],
        "min_batch_size": 100,
    },
    {
        "name": "ts-memo-pem",
        "mechanism": {
            "mechanism": "pem",
            "epsilon": 4.0,
            "max_length": 4,
            "start_bits": 7,
            "step_bits": 4,
            "g": 56,
            "final_weight": 1,
            "longitudinal": {"epsilon_permanent": 6.0},
        },
        "min_batch_size": 100,
    },
]
FLEET_DEVICES = 600


def fleet_values(campaign: dict[str, Any], n: int) -> tuple[list[Any], np.ndarray | None]:
    """What each device of a fleet records, and the truth its estimate must find (multi: the
    frequencies of ``os``; hierarchical: of the domain; pem: none, its reports are counted)."""
    mechanism = campaign["mechanism"]["mechanism"]
    counts = [round(w * n) for w in WEIGHTS]
    if mechanism == "multi":
        os_counts = [counts[0], counts[1], n - counts[0] - counts[1]]
        values = [
            {"os": label, "theme": "dark" if i % 3 else "light"}
            for label, c in zip(OS, os_counts, strict=True)
            for i in range(c)
        ]
        return values, np.array(os_counts) / n
    if mechanism == "hierarchical":
        return population(campaign, n)
    return [["home", "mail", "abc", ""][i % 4] for i in range(n)], None


@pytest.mark.parametrize("fleet", FLEETS, ids=[f["name"] for f in FLEETS])
def test_node_devices_record_every_kind_of_campaign_to_a_real_collector(
    fleet: dict[str, Any], ts_build: Path, collector: CollectorProcess, tmp_path: Path
) -> None:
    """Node devices, each with its own device secret, record a multi-attribute campaign (SMP: the
    device's attribute from its keyed source), a range campaign (the device's level) and a
    memoized PEM campaign (the device's level; each string's permanent response): the collector
    stores every report once and the estimate finds the truth within its error bars."""
    served = collector.create_campaign(fleet)
    values, truth = fleet_values(fleet, FLEET_DEVICES)
    job = {
        "package": str(ts_build / "src" / "index.js"),
        "url": collector.url,
        "campaign": served["name"],
        "state": str(tmp_path / "device"),
        "values": values,
        "seed": "7e" * 32,
        "devices": True,
        # memoized PEM sends each string's permanent hash seed: a pseudonym the app must allow
        "policy": {"allow_pseudonymous_memoization": True},
    }
    outcome = run_node(job)
    assert outcome["recorded"] == FLEET_DEVICES, outcome
    assert outcome["acknowledged"] == FLEET_DEVICES, outcome
    assert outcome["left"] == 0 and outcome["status"]["last_error"] is None, outcome
    name = fleet["name"]
    assert count_reports(collector.db, name) == FLEET_DEVICES
    spec = load_campaign(collector.db, name)
    result = estimate(spec.mechanism, iter_report_chunks(collector.db, name, chunk_size=5000))
    if truth is None:
        return  # pem: the heavy hitters of 600 devices are too few to test a discovery against
    if fleet["mechanism"]["mechanism"] == "multi":
        marginal = result.marginal("os")
        assert_within_z(marginal.frequencies, truth, marginal.std_errors, z=5.0, what="os")
    else:
        assert_within_z(result.frequencies, truth, result.std_errors, z=5.0, what="frequencies")
