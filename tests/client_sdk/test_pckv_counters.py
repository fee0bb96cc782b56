"""The device counts its PCKV records with more pairs than the padding (issue 21, item 6), and the
estimates of a real collector process and of ``ldp-analyze`` state what such records do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from analysis.cli import main
from client_sdk import TelemetryClient
from collector.process import CollectorProcess

CAMPAIGN = {
    "name": "features",
    "mechanism": {"mechanism": "pckv", "epsilon": 2.0, "k": 6, "padding": 2},
    "min_batch_size": 1,
}
RECORDS = [{}, {0: 0.5}, {0: 0.5, 1: -1.0}, {0: 1.0, 2: 0.0, 3: 0.5}, {k: 0.1 for k in range(6)}]
"""Sizes 0, 1, 2, 3 and 6: two records have more pairs than the padding of 2."""


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("pckv")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as process:
        process.create_campaign(CAMPAIGN)
        yield process


def test_the_device_counts_records_over_the_padding(
    collector: CollectorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with TelemetryClient(collector.url, state_dir=tmp_path / "device") as client:
        assert client.counters("features") == {}
        client.record_many("features", RECORDS * 10)
        assert client.counters("features") == {"pckv_records_over_padding": 20}
        client.record("features", {1: 0.0, 4: 1.0, 5: -0.5})
        client.record("features", {1: 0.0})
        assert client.counters("features") == {"pckv_records_over_padding": 21}
        with pytest.raises(ValueError, match="outside"):
            client.record_many("features", [{0: 0.5, 1: 0.5, 2: 0.5}, {9: 0.5}])
        assert client.counters("features") == {"pckv_records_over_padding": 21}  # nothing sent
        assert client.flush() == 52
    served = requests.get(
        f"{collector.url}/v1/campaigns/features/estimate", headers=collector.admin(), timeout=30
    ).json()
    assert served["n"] == 52
    (note,) = served["notes"]
    assert "|S| > 2" in note and "biased low" in note
    assert main(["estimate", "--db", collector.db, "--campaign", "features"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == [note]
    assert (
        main(["estimate", "--db", collector.db, "--campaign", "features", "--format", "table"]) == 0
    )
    assert f"note: {note}" in capsys.readouterr().out
