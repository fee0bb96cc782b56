"""RAPPOR campaigns stored by the collector, with their candidate list as the domain, estimated
by ``ldp-analyze estimate`` (decoded with ``analysis.kinds.rappor.estimate``)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from client_sdk import mechanism_from_config
from client_sdk.mechanisms.rappor import RAPPOR
from collector.storage import Storage
from tests.stats import assert_within_z

CONFIG = {"mechanism": "rappor", "k": 32, "h": 2, "m": 16, "f": 0.25, "p": 0.25, "q": 0.75}
CANDIDATES = [f"https://site-{i}.example/" for i in range(12)]
HELD = {0: 0.5, 1: 0.3, 2: 0.2}  # candidates 3..11 are held by nobody
CLIENTS = 20_000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rappor") / "collector.db"
    mechanism = mechanism_from_config(CONFIG)
    assert isinstance(mechanism, RAPPOR)
    counts = [int(share * CLIENTS) for share in HELD.values()]
    values = [CANDIDATES[i] for i, c in zip(HELD, counts, strict=True) for _ in range(c)]
    reports = mechanism.simulate_clients(values, rng=np.random.default_rng(11))
    with Storage(path) as storage:
        storage.create_campaign({"name": "homepage", "mechanism": CONFIG, "domain": CANDIDATES})
        storage.create_campaign({"name": "no-candidates", "mechanism": CONFIG})
        rows = [(secrets.token_hex(16), json.dumps(p)) for p in mechanism.to_wire(reports)]
        storage.insert_reports("homepage", rows)
        storage.insert_reports("no-candidates", rows[:500])
    return path


def test_rappor_campaign_is_decoded_against_its_candidates(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "--db", str(db), "--campaign", "homepage"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["campaign"] == "homepage"
    assert document["n"] == CLIENTS
    assert [item["value"] for item in document["items"]] == CANDIDATES
    frequencies = np.array([item["frequency"] for item in document["items"]])
    errors = np.array([item["std_error"] for item in document["items"]])
    truth = np.array([HELD.get(i, 0.0) for i in range(len(CANDIDATES))])
    held = truth > 0
    assert_within_z(frequencies[held], truth[held], errors[held], what="held candidates")
    assert all(item["significant"] for item, h in zip(document["items"], held, strict=True) if h)
    # Under Bonferroni at alpha 0.05 an absent candidate is significant with probability
    # below 0.05/12: two or more false positives among nine would be a failure of the decoder.
    false_positives = sum(
        item["significant"] for item, h in zip(document["items"], held, strict=True) if not h
    )
    assert false_positives <= 1
    assert "cannot be found" in document["note"]


def test_rappor_table_output(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--db", str(db), "--campaign", "homepage", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert CANDIDATES[0] in out and "significant" in out


def test_rappor_campaign_without_candidates_is_a_clear_error(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "--db", str(db), "--campaign", "no-candidates"]) == 2
    err = capsys.readouterr().err
    assert "candidate list" in err and "rappor-decode" in err


def test_rappor_candidates_must_be_unique_strings(tmp_path: Path) -> None:
    with Storage(tmp_path / "c.db") as storage:
        with pytest.raises(ValueError, match="unique"):
            storage.create_campaign({"name": "dup", "mechanism": CONFIG, "domain": ["a", "a"]})
        with pytest.raises(ValueError, match=r"domain\[1\] must be a string"):
            storage.create_campaign({"name": "num", "mechanism": CONFIG, "domain": ["a", 1]})
