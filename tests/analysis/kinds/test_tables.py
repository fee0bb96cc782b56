"""Every estimate table reads the same way (issue 27, "Answers before noise"): the one header
line of ``ldp-analyze estimate`` (campaign, n, mechanism, its epsilon, the intervals'
confidence), and each row of an estimated quantity with its standard error and interval columns,
for every registered mechanism's kind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import analysis
from analysis.cli import main
from analysis.commands.estimate import format_table, table_head
from analysis.documents import frequency_document, mean_document
from analysis.estimation import DocumentedEstimate, MeanEstimate
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.registry import MECHANISMS
from tests.analysis.conftest import store_campaign
from tests.analysis.kinds.test_contract import device_reports, stored, vector

DEVICES = 120
HEAD = re.compile(
    r"^campaign contract  n=120  mechanism [a-z_]+ \(epsilon [0-9.]+\)  .*95% intervals"
)


def estimate_table(name: str) -> str:
    """What ``ldp-analyze estimate --format table`` prints for ``name``'s vector campaign."""
    config, values = vector(name)
    mechanism = mechanism_from_config(config)
    reports = device_reports(mechanism, values, DEVICES, seed=len(name))
    candidates = sorted({v for v in values if isinstance(v, str) and v}) or None
    result: Any = analysis.estimate(mechanism, reports, candidates=candidates)
    campaign = stored(mechanism, values)
    if isinstance(result, DocumentedEstimate):
        return table_head("contract", result.to_dict()) + "\n" + result.format_table()
    if isinstance(result, MeanEstimate):
        document = mean_document(campaign, result)
    else:
        document = frequency_document(campaign, result)
    return format_table({**document, "campaign": "contract"})


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_kind_has_the_header_line_and_the_interval_columns(name: str) -> None:
    text = estimate_table(name)
    lines = text.splitlines()
    assert HEAD.match(lines[0]), lines[0]
    headers = [line.split() for line in lines if "ci_low" in line.split()]
    assert headers, text  # at least one table of estimates with intervals
    for line in lines:
        tokens = line.split()
        for i, token in enumerate(tokens):
            if token == "std_error":  # a header: the interval follows its standard error
                assert tokens[i + 1 : i + 3] == ["ci_low", "ci_high"], line


def test_the_daily_series_has_the_same_header_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "c.db"
    config = {"mechanism": "grr", "epsilon": 2.0, "k": 3}
    document = {"name": "contract", "mechanism": config, "domain": ["a", "b", "c"]}
    store_campaign(db, document, np.arange(120) % 3, 1)
    argv = ["estimate", "--db", str(db), "--campaign", "contract", "--by", "day"]
    assert main([*argv, "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert HEAD.match(lines[0]) and "by day" in lines[0], lines[0]
    assert lines[1].split()[-4:] == ["estimate", "std_error", "ci_low", "ci_high"]
