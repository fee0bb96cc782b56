"""Heavy hitters end to end: string campaigns created over HTTP on a real gunicorn collector,
real TelemetryClients recording strings (one state directory per device), and the
``ldp-analyze estimate`` command in a subprocess printing the ``items`` shape
(docs/math/heavy-hitters.md).

- ``pem`` (no domain): each device's level comes from its own secret, so the fleet is many
  devices; the heavy strings (one of 0 bytes, one of exactly max_length bytes, multi-byte
  UTF-8) are significant and at most one significant string is held by nobody (E[false] <=
  0.05 a run).
- ``cms`` with candidates: the heavy candidates are significant, the absent one is not.
- the same pem campaign memoized (``"longitudinal"``): a device reporting its string every
  day sends the same hash seed and is charged epsilon_inf once.
- an over-long value is refused naming the campaign, the limit and the length, not the value,
  and nothing is queued.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from client_sdk import TelemetryClient
from client_sdk.budget import BudgetExceededError
from client_sdk.policy import PrivacyPolicy
from collector.process import CollectorProcess, entry_point

MAX_LENGTH = 3
HEAVY = {"": 0.2, "日": 0.15, "abc": 0.12}  # 0 bytes, 3 bytes of UTF-8, exactly max_length
DEVICES = 150
PER_DEVICE = 100
PEM = {"mechanism": "pem", "epsilon": 4.0, "max_length": MAX_LENGTH, "step_bits": 6}
CMS = {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, "max_length": MAX_LENGTH}


def population(rng: np.random.Generator, n: int) -> list[str]:
    """The heavy strings at their frequencies, the rest spread over 2,000 two-letter-ish tails."""
    tail = [f"{i:03x}"[-3:] for i in range(2000)]
    heavy = list(HEAVY)
    weights = np.array(list(HEAVY.values()))
    draws = rng.random(n)
    picks = np.searchsorted(np.cumsum(weights), draws, side="right")
    return [heavy[p] if p < len(heavy) else tail[int(rng.integers(len(tail)))] for p in picks]


def analyze(collector: CollectorProcess, campaign: str) -> dict[str, Any]:
    command = [*entry_point("ldp-analyze", "analysis.cli"), "estimate", "--db", collector.db]
    done = subprocess.run(
        [*command, "--campaign", campaign, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_discovery_and_candidates_through_the_whole_system(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    collector.create_campaign({"name": "hh-search", "mechanism": PEM})
    collector.create_campaign(
        {"name": "hh-terms", "mechanism": CMS, "domain": [*HEAVY, "zzz", "é"]}
    )
    rng = np.random.default_rng(2026)
    held: set[str] = set()
    sent = 0
    for device in range(DEVICES):
        values = population(rng, PER_DEVICE)
        held.update(values)
        with TelemetryClient(
            collector.url,
            state_dir=tmp_path / f"device-{device}",
            rng=np.random.default_rng(device),
        ) as client:
            client.record_many("hh-search", values)
            if device < 20:  # a fifth of the fleet answers the sketch campaign
                client.record_many("hh-terms", values)
            sent += client.flush()
    assert sent == DEVICES * PER_DEVICE + 20 * PER_DEVICE

    found = analyze(collector, "hh-search")
    assert found["n"] == DEVICES * PER_DEVICE
    assert set(found["items"][0]) >= {"value", "frequency", "std_error", "significant"}
    significant = {item["value"]: item for item in found["items"] if item["significant"]}
    assert set(HEAVY) <= set(significant)
    # E[false discoveries] <= alpha = 0.05 a run, and the levels come from the devices' own
    # secrets (new every run): one false string is a 1-in-20 event by design, two or more have
    # probability <= 0.025 (Markov). The rate itself is tested over 40 runs in
    # tests/analysis/test_discovery_significance.py.
    false = set(significant) - held
    assert len(false) <= 1, false
    for value, frequency in HEAVY.items():
        item = significant[value]
        assert abs(item["frequency"] - frequency) < 5.5 * item["std_error"] + 0.02  # sampling
    assert len(found["levels"]) > 1 and all(level["reports"] > 0 for level in found["levels"])

    terms = analyze(collector, "hh-terms")
    items = {item["value"]: item for item in terms["items"]}
    assert terms["n"] == 20 * PER_DEVICE
    assert set(items) == {*HEAVY, "zzz", "é"}
    assert all(items[v]["significant"] for v in HEAVY)
    assert not items["zzz"]["significant"] and not items["é"]["significant"]


def test_memoized_discovery_and_boundary_strings(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    memoized = {**PEM, "longitudinal": {"epsilon_permanent": 6.0}}
    budget = {"epsilon_per_report": 6.0, "reports_per_period": 3, "period_seconds": 86400}
    collector.create_campaign({"name": "hh-daily", "mechanism": memoized, "policy": budget})
    policy = PrivacyPolicy(allow_pseudonymous_memoization=True)
    with TelemetryClient(collector.url, state_dir=tmp_path / "phone", policy=policy) as client:
        for _ in range(7):  # the same search term every day of a week
            client.record("hh-daily", "日")
        client.record("hh-daily", "")
        client.record("hh-daily", "abc")
        charged = [entry.epsilon_charged for entry in client.privacy_log("hh-daily")]
        assert charged == [6.0, *[0.0] * 6, 6.0, 6.0]  # epsilon_inf once per distinct string
        with pytest.raises(BudgetExceededError):
            client.record("hh-daily", "new")  # a fourth distinct string: over the budget
        # Over max_length ("日é": 2 characters, 5 bytes of UTF-8): the reserved symbol, one
        # more distinct string to the ledger, so over this budget like "new" (issue 21, item 14:
        # never a refusal of its own that would tell the value was out of range).
        for value in ("abcd", "日é"):
            with pytest.raises(BudgetExceededError) as refused:
                client.record("hh-daily", value)
            assert value not in str(refused.value)
        assert client.status()["reserved_values"] == {}  # nothing sent
        assert client.pending("hh-daily") == 9
        assert client.flush() == 9
    stored = [json.loads(payload) for payload in _payloads(collector.db, "hh-daily")]
    assert len(stored) == 9
    seeds = [tuple(report["seed"]) for report in stored]
    assert len(set(seeds[:7])) == 1  # one permanent response: the same seed every day
    assert len(set(seeds)) == 3
    assert len({report["level"] for report in stored}) == 1  # the device's level


def _payloads(db: str, campaign: str) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT r.payload FROM reports r JOIN campaigns c ON c.id = r.campaign_id "
            "WHERE c.name = ? ORDER BY r.seq",
            [campaign],
        ).fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]
