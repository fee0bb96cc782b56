"""The TypeScript client's central ceiling against real processes: a collector calibrates a
shuffled campaign to its central target, a real shuffler takes the sealed reports, and a Node
device accepts the campaign's larger local epsilon only on the app's terms (a shuffler and a
central ceiling the device's own amplification bound confirms), with the verdict, field and
figures of the Python client (``client_sdk.policy.PrivacyPolicy.check``) on the same document."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client_sdk.mechanisms import mechanism_from_config
from client_sdk.policy import PolicyViolation, PrivacyPolicy
from tests.client_sdk_ts.conftest import require_node
from tests.e2e.conftest import stored_ids
from tests.shuffler.deployment import Deployment

HERE = Path(__file__).parent
MIN_BATCH = 200
CAMPAIGN: dict[str, Any] = {
    "name": "ts-shuffled",
    "mechanism": {"mechanism": "grr", "k": 4},
    "domain": ["light", "dark", "system", "contrast"],
    "shuffle": {"min_batch": MIN_BATCH, "central_epsilon": 1.0, "delta": 1e-6},
}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with Deployment(tmp_path_factory.mktemp("ts-shuffled"), campaign=CAMPAIGN) as deployment:
        yield deployment


def run_device(deployment: Deployment, policy: dict[str, Any], *, shuffler: bool) -> Any:
    job: dict[str, Any] = {
        "package": str(HERE.parents[1] / "client_sdk_ts" / "dist" / "src" / "index.js"),
        "url": deployment.collector.url,
        "campaign": CAMPAIGN["name"],
        "values": [CAMPAIGN["domain"][i % 4] for i in range(MIN_BATCH)],
        "seed": "6b" * 32,
        "policy": policy,
    }
    if shuffler:
        job["shuffler"] = deployment.shuffler.url
    result = subprocess.run(
        [require_node(), str(HERE / "record_shuffled.mjs")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"the Node device failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def python_verdict(document: dict[str, Any], policy: dict[str, Any], *, shuffler: bool) -> Any:
    """What the Python client's policy says of the same served document."""
    try:
        PrivacyPolicy(**policy).check(
            document["name"],
            mechanism_from_config(document["mechanism"]),
            config_id=document["config_id"],
            shuffle=document["shuffle"],
            through_shuffler=shuffler,
        )
    except PolicyViolation as violation:
        return {
            "field": violation.field,
            "campaign_value": violation.campaign_value,
            "policy_value": violation.policy_value,
        }
    return None


def test_the_calibrated_campaign_goes_through_the_shuffler_under_a_central_ceiling(
    deployment: Deployment, ts_build: Path
) -> None:
    """Local epsilon 1.64 (batches of 200 at (1, 1e-6)) above the app's max_epsilon 1: accepted
    under max_central_epsilon 1 through the shuffler, and every report reaches the collector
    in one batch of at least min_batch."""
    epsilon0 = deployment.document["mechanism"]["epsilon"]
    policy = {"max_epsilon": 1.0, "max_central_epsilon": 1.0}
    assert epsilon0 > 1.5
    assert python_verdict(deployment.document, policy, shuffler=True) is None
    outcome = run_device(deployment, policy, shuffler=True)
    assert outcome["recorded"] == MIN_BATCH and outcome["acknowledged"] == MIN_BATCH, outcome
    assert outcome["left"] == 0 and outcome["last_error"] is None, outcome
    deadline = time.monotonic() + 60
    while len(stored_ids(deployment.collector.db, CAMPAIGN["name"])) < MIN_BATCH:
        assert time.monotonic() < deadline, "the shuffler did not forward the batch"
        time.sleep(0.1)
    assert len(set(stored_ids(deployment.collector.db, CAMPAIGN["name"]))) == MIN_BATCH


@pytest.mark.parametrize(
    ("policy", "shuffler", "field"),
    [
        ({"max_epsilon": 1.0, "max_central_epsilon": 0.9}, True, "max_central_epsilon"),
        ({"max_epsilon": 1.0, "max_central_epsilon": 1.0}, False, "max_epsilon"),
        ({"max_epsilon": 1.0}, True, "max_epsilon"),
        (
            {"max_epsilon": 1.0, "max_central_epsilon": 1.0, "max_central_delta": 1e-7},
            True,
            "max_central_delta",
        ),
        (
            {"max_epsilon": 1.0, "max_central_epsilon": 1.0, "max_shuffled_epsilon": 1.5},
            True,
            "max_shuffled_epsilon",
        ),
    ],
)
def test_beyond_the_ceiling_the_device_refuses_as_python_does(
    deployment: Deployment, ts_build: Path, policy: dict[str, Any], shuffler: bool, field: str
) -> None:
    """A ceiling below the target, no shuffler, no ceiling, a delta or a local epsilon beyond the
    app's: refused before anything is randomized, naming the field with Python's values."""
    before = len(stored_ids(deployment.collector.db, CAMPAIGN["name"]))
    outcome = run_device(deployment, policy, shuffler=shuffler)
    assert "refused" in outcome and outcome["left"] == 0, outcome
    refused = outcome["refused"]
    assert refused["field"] == field, refused
    expected = python_verdict(deployment.document, policy, shuffler=shuffler)
    assert {k: refused[k] for k in ("field", "campaign_value", "policy_value")} == expected
    assert len(stored_ids(deployment.collector.db, CAMPAIGN["name"])) == before
