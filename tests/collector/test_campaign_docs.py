"""docs/campaigns.md is true: every JSON document on the page is created on a real
``ldp-collector serve`` process (201, and the served campaign is the document's canonical form
with the same ``config_id``), and the errors its table states are the mechanisms' exact ones."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from client_sdk.campaign import CampaignSpec, parse_campaign
from collector.process import CollectorProcess

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "campaigns.md"
N = 10_000
"""The number of devices the page's table states its errors at."""


def documents(text: str) -> list[dict[str, Any]]:
    """Every fenced ```json block of ``text``, parsed (a block that is not JSON fails here)."""
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, flags=re.S)]


def table_row(text: str, anchor: str) -> str:
    """The table row linking to ``#anchor``."""
    rows = [line for line in text.splitlines() if line.startswith("| [") and f"(#{anchor})" in line]
    assert len(rows) == 1, f"no single table row for #{anchor}: {rows}"
    return rows[0]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("campaign-docs")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as process:
        yield process


def test_the_page_has_one_document_per_question() -> None:
    text = PAGE.read_text(encoding="utf-8")
    found = documents(text)
    anchors = re.findall(r"^\| \[[^\]]+\]\(#([a-z0-9-]+)\)", text, flags=re.M)
    assert len(found) == len(anchors) == 8
    assert len({document["name"] for document in found}) == len(found)


def test_every_document_is_created_on_a_real_collector(collector: CollectorProcess) -> None:
    for document in documents(PAGE.read_text(encoding="utf-8")):
        response = requests.post(
            f"{collector.url}/v1/campaigns", json=document, headers=collector.admin(), timeout=30
        )
        assert response.status_code == 201, (document["name"], response.text)
        expected = parse_campaign(document)
        served = requests.get(f"{collector.url}/v1/campaigns/{document['name']}", timeout=30)
        assert served.status_code == 200
        body = served.json()
        assert body["config_id"] == expected.config_id, document["name"]
        assert {key: body.get(key) for key in expected.content()} == expected.content()


def _spec(name: str) -> CampaignSpec:
    text = PAGE.read_text(encoding="utf-8")
    (document,) = [d for d in documents(text) if d["name"] == name]
    return parse_campaign(document)


def _standard_error(spec: CampaignSpec) -> float:
    """One standard error at N devices from the mechanism's exact variance, as the table states
    it: a frequency near 0 for frequency estimates, the worst case for a mean."""
    mechanism: Any = spec.mechanism
    kind = spec.config["mechanism"]
    if kind in ("ss", "grr"):
        return math.sqrt(mechanism.variance(N, [0.0])[0])
    if kind == "hybrid":
        return float(mechanism.worst_case_standard_errors(N)[0])
    if kind == "square_wave":
        grid = np.linspace(mechanism.lower, mechanism.upper, 1001)
        return math.sqrt(float(np.max(mechanism.mean_variance(grid))) / N)
    if kind == "pem":
        return math.sqrt(mechanism.frequency_variance(N / mechanism.levels, N, [0.0])[0])
    if kind == "multi":
        return math.sqrt(mechanism.variance(N, 0, [0.0])[0])
    if kind == "pckv":
        return math.sqrt(mechanism.frequency_variance(N, [0.0])[0])
    raise AssertionError(f"no stated error for mechanism {kind!r}")


@pytest.mark.parametrize(
    ("anchor", "name", "digits"),
    [
        ("which-one-of-a-known-list", "start-screen", 3),
        ("how-many-in-total", "crashes-per-day", 2),
        ("a-mean", "session-minutes", 2),
        ("a-distribution-median-or-p95", "load-time", 2),
        ("free-text-top-terms", "search-terms", 4),
        ("two-attributes-together", "os-and-version", 4),
        ("a-key-and-its-value", "feature-ratings", 3),
        ("a-yesno", "notifications-on", 4),
    ],
)
def test_the_table_states_the_exact_error_and_epsilon(anchor: str, name: str, digits: int) -> None:
    text = PAGE.read_text(encoding="utf-8")
    row = table_row(text, anchor)
    spec = _spec(name)
    error = f"±{_standard_error(spec):.{digits}f}".rstrip("0")
    assert error in row, (name, error, row)
    epsilon = f"ε = {spec.mechanism.privacy_epsilon:g}"
    assert epsilon in row, (name, epsilon, row)
    assert spec.mechanism.privacy_delta == 0.0
