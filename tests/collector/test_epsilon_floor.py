"""A real collector refuses a campaign whose epsilon is below the floor with a problem+json 400
naming the field and the floor, and serves finite estimates for one at the floor (issue 21,
item 9: 5e-324 and 1e-300 were created with 201, then ``GET /estimate`` answered 500); a
campaign stored before the floor still lists, and its estimates are refused naming the floor."""

from __future__ import annotations

import math
import secrets
import sqlite3
from collections.abc import Iterator

import numpy as np
import pytest
import requests

from analysis.cli import main
from client_sdk.config import canonical_json
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms._validation import MIN_EPSILON
from client_sdk.protocol import PROBLEM_TYPES
from collector.process import CollectorProcess


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("floor")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as process:
        yield process


def hybrid(name: str, epsilon: float) -> dict[str, object]:
    return {
        "name": name,
        "mechanism": {"mechanism": "hybrid", "epsilon": epsilon, "lower": 0, "upper": 1},
        "min_batch_size": 10,
    }


@pytest.mark.parametrize("epsilon", [5e-324, 1e-300, math.nextafter(MIN_EPSILON, 0.0)])
def test_a_campaign_below_the_floor_is_a_400_problem(
    collector: CollectorProcess, epsilon: float
) -> None:
    response = requests.post(
        f"{collector.url}/v1/campaigns",
        json=hybrid("tiny", epsilon),
        headers=collector.admin(),
        timeout=30,
    )
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["type"] == PROBLEM_TYPES["malformed-request"]
    assert "epsilon must be at least 0.0001" in problem["detail"]
    assert requests.get(f"{collector.url}/v1/campaigns/tiny", timeout=30).status_code == 404


def test_a_campaign_at_the_floor_estimates_finite_numbers(collector: CollectorProcess) -> None:
    served = collector.create_campaign(hybrid("floor", MIN_EPSILON))
    mechanism = mechanism_from_config(served["mechanism"])
    rng = np.random.default_rng(2)
    values = rng.uniform(0.0, 1.0, 500)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=rng))
    reports = [{"id": secrets.token_hex(16), "payload": p} for p in payloads]
    upload = requests.post(
        f"{collector.url}/v1/campaigns/floor/reports",
        json={"config_id": served["config_id"], "reports": reports},
        timeout=30,
    )
    assert upload.status_code == 200, upload.text
    response = requests.get(
        f"{collector.url}/v1/campaigns/floor/estimate", headers=collector.admin(), timeout=30
    )
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["n"] == 500
    mean, error = float(np.ravel(document["mean"])[0]), float(np.ravel(document["std_error"])[0])
    assert math.isfinite(mean) and math.isfinite(error)
    assert abs(mean - values.mean()) <= 4 * error


def test_a_campaign_stored_before_the_floor_lists_and_refuses_estimates(
    collector: CollectorProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database from before the floor may hold such a campaign: it must not break the listing
    (one bad row made GET /v1/campaigns a 500), and its estimates are refused by name."""
    config = {"mechanism": "grr", "epsilon": 1e-300, "k": 3}
    conn = sqlite3.connect(collector.db)
    try:
        with conn:
            conn.execute(
                "INSERT INTO campaigns (name, config_id, mechanism, domain, policy, "
                "min_batch_size, created) VALUES (?, ?, ?, ?, NULL, 1, ?)",
                ["old", "ab" * 16, canonical_json(config), '["a","b","c"]', "2026-01-01T00:00:00Z"],
            )
    finally:
        conn.close()
    listing = requests.get(f"{collector.url}/v1/campaigns", timeout=30)
    assert listing.status_code == 200, listing.text
    assert "old" in {c["name"] for c in listing.json()["campaigns"]}
    stored = mechanism_from_config(config, stored=True)
    payloads = stored.to_wire(stored.perturb(np.arange(30) % 3, rng=np.random.default_rng(3)))
    upload = requests.post(
        f"{collector.url}/v1/campaigns/old/reports",
        json={
            "config_id": "ab" * 16,
            "reports": [{"id": secrets.token_hex(16), "payload": p} for p in payloads],
        },
        timeout=30,
    )
    assert upload.status_code == 200, upload.text
    response = requests.get(
        f"{collector.url}/v1/campaigns/old/estimate", headers=collector.admin(), timeout=30
    )
    assert response.status_code == 422, response.text
    assert "below the floor 0.0001" in response.json()["detail"]
    assert main(["estimate", "--db", collector.db, "--campaign", "old"]) == 2
    assert "below the floor 0.0001" in capsys.readouterr().err
