"""The TypeScript client's secure-aggregation campaigns against a real DAP pair (docs/dap.md,
"The device"): Node devices pin a campaign document, record through the built package's
``TelemetryClient`` (Prio3 shards sealed to both Aggregators) and flush to a real Leader; the
Leader and Helper (``ldp-collector serve`` processes) aggregate, and the Collector
(``ldp-analyze collect``, ``analysis.dap_collect``) reads the result through the campaign.

Two tasks on one pair. A Histogram with discrete Laplace noise at epsilon 40: a draw is nonzero
with probability < 2 exp(-20) (tests/collector/dap/test_device.py), so the 8 draws all vanish but
with probability < 3.4e-8 and the collected histogram is asserted to be the exact truth. A
Histogram with ``local`` grr (epsilon 2) and noise at epsilon 1: the debiased estimate
(``analysis/dap_local.py``) within 5 of its standard errors of the truth.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from client_sdk.dap.campaign import b64encode
from collector.dap.cli import read_key
from tests.client_sdk_ts.conftest import DIST, require_node
from tests.collector.dap.conftest import (
    COLLECTOR_TOKEN,
    TIME_PRECISION,
    DapPair,
    DapServers,
    _in_process,
    add_task,
    start_servers,
)
from tests.collector.dap.test_device import campaign_document
from tests.stats import assert_within_z

HERE = Path(__file__).parent
LABELS = ["none", "one", "few", "many"]
HISTOGRAM = {"type": "histogram", "length": 4, "chunk_length": 2}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DapServers]:
    pair = start_servers(tmp_path_factory.mktemp("ts-dap"))
    try:
        yield pair
    finally:
        pair.stop()


def trusted(pair: DapPair) -> dict[str, str]:
    """The app's trusted_aggregators: the pair's two endpoints and keys."""
    out = {}
    for role, url in (("leader", pair.spec.leader), ("helper", pair.spec.helper)):
        config, _ = read_key(str(pair.tmp / f"{role}-key.json"))
        out[url] = b64encode(config.public_key)
    return out


def run_fleet(
    pair: DapPair,
    document: dict[str, Any],
    devices: list[list[str]],
    tmp: Path,
    *,
    lose_first_answer: bool = False,
    **policy: Any,
) -> dict[str, Any]:
    job = {
        "lose_first_answer": lose_first_answer,
        "package": str(DIST / "src" / "index.js"),
        "url": pair.leader.url,
        "document": json.dumps(document),
        "policy": {"trusted_aggregators": trusted(pair), **policy},
        "devices": devices,
        "state": str(tmp / "devices"),
        "seed": "3c" * 32,
    }
    done = subprocess.run(
        [require_node(), str(HERE / "record_dap.mjs")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"the Node devices failed:\n{done.stdout}\n{done.stderr}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def collect(pair: DapPair, document: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The Collector's result, read through the campaign the devices pinned."""
    path = tmp / "campaign.json"
    path.write_text(json.dumps(document))
    unit = int(time.time()) // TIME_PRECISION
    args = [
        "collect", "--task", str(pair.task_file), "--leader", pair.leader_dap,
        "--collector-key", str(pair.collector_key), "--token", COLLECTOR_TOKEN,
        "--interval", f"{unit - 1},3", "--timeout", "60", "--campaign", str(path),
    ]  # fmt: skip
    done = _in_process("analysis.cli", args)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_node_devices_histogram_collected_exactly(
    ts_build: Path, servers: DapServers, tmp_path: Path
) -> None:
    pair = add_task(servers, HISTOGRAM, min_batch_size=10, dp="laplace:40")
    document = campaign_document(pair, "ts-crashes", domain=LABELS)
    devices = [[LABELS[(3 * d + r) % 4] for r in range(4)] for d in range(6)]
    # every device's first answer is lost: it uploads its reports again, and the Leader counts
    # them once (report_replayed: the ids are fixed at record time)
    outcome = run_fleet(
        pair, document, devices, tmp_path, lose_first_answer=True, max_central_epsilon=40.0
    )
    assert outcome["lost"] == 6, outcome
    assert outcome["recorded"] == outcome["acknowledged"] == 24, outcome
    assert outcome["left"] == 0 and outcome["errors"] == [] and outcome["dropped"] == []
    # Only sealed reports were stored on the devices: no label in any state file.
    stored = "".join(p.read_text() for p in (tmp_path / "devices").rglob("*.json"))
    assert not any(f'"{label}"' in stored for label in LABELS)
    assert pair.drive() == {"aggregated": 24, "rejected": 0, "jobs": 1}
    truth = [sum(values.count(label) for values in devices) for label in LABELS]
    result = collect(pair, document, tmp_path)
    assert result["campaign"] == "ts-crashes" and result["report_count"] == 24
    assert result["estimate"] == truth  # noise zero but with probability < 3.4e-8


def test_node_devices_local_randomization_within_error_bars(
    ts_build: Path, servers: DapServers, tmp_path: Path
) -> None:
    pair = add_task(servers, HISTOGRAM, min_batch_size=10, dp="laplace:1")
    document = campaign_document(
        pair,
        "ts-theme",
        domain=LABELS,
        local={"mechanism": "grr", "epsilon": 2.0, "k": 4},
    )
    weights = [0.5, 0.25, 0.15, 0.10]
    values = [label for label, w in zip(LABELS, weights, strict=True) for _ in range(int(600 * w))]
    devices = [values[i::4] for i in range(4)]
    outcome = run_fleet(pair, document, devices, tmp_path)  # local epsilon 2 <= max_epsilon 4
    assert outcome["recorded"] == outcome["acknowledged"] == 600, outcome
    assert outcome["left"] == 0 and outcome["errors"] == []
    assert pair.drive() == {"aggregated": 600, "rejected": 0, "jobs": 1}
    result = collect(pair, document, tmp_path)
    assert result["report_count"] == 600 and result["local_epsilon"] == 2.0
    truth = np.array([values.count(label) for label in LABELS], dtype=float)
    assert_within_z(
        np.array(result["estimate"]),
        truth,
        np.array(result["std_errors"]),
        z=5.0,
        what="debiased counts",
    )
    # the collected histogram is GRR's randomized one: it differs from the truth
    assert result["collected"] != [int(t) for t in truth]
