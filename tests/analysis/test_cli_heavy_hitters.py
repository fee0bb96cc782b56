"""String campaigns without a domain (pem) and with candidates (cms), stored by the collector
and estimated by ``ldp-analyze estimate`` in the ``items`` shape (docs/math/heavy-hitters.md)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from client_sdk import mechanism_from_config
from collector.storage import Storage

PEM_CONFIG = {"mechanism": "pem", "epsilon": 6.0, "max_length": 2, "step_bits": 6}
CMS_CONFIG = {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, "max_length": 8}
HELD = {"ok": 4000, "é": 3000, "": 2000}
TAIL = 3000


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("heavy") / "collector.db"
    rng = np.random.default_rng(3)
    values = [v for v, c in HELD.items() for _ in range(c)]
    values += [f"{i:02x}" for i in rng.integers(0, 256, size=TAIL)]
    with Storage(path) as storage:
        for name, config, domain in (
            ("search", PEM_CONFIG, None),
            ("terms", CMS_CONFIG, ["ok", "é", "", "absent"]),
        ):
            document = {"name": name, "mechanism": config}
            if domain is not None:
                document["domain"] = domain
            storage.create_campaign(document)
            mechanism = mechanism_from_config(config)
            payloads = mechanism.to_wire(mechanism.perturb(values, rng=rng))
            rows = [(secrets.token_hex(16), json.dumps(p)) for p in payloads]
            storage.insert_reports(name, rows)
    return path


def test_a_discovery_campaign_prints_its_discovered_items(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "--db", str(db), "--campaign", "search"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["n"] == sum(HELD.values()) + TAIL
    significant = [item["value"] for item in document["items"] if item["significant"]]
    assert set(HELD) <= set(significant)
    assert set(document["items"][0]) >= {"value", "frequency", "std_error", "significant"}
    assert [level["reports"] for level in document["levels"]]
    argv = ["estimate", "--db", str(db), "--campaign", "search", "--format", "table"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "level 0:" in table
    head, columns, *rows = table.splitlines()
    assert head.startswith(f"campaign search  n={document['n']}  mechanism pem")
    assert columns.split() == [
        *("value", "frequency", "std_error", "ci_low", "ci_high", "significant")
    ]
    marks = [row.rsplit(" ", 1)[-1] for row in rows[: len(document["items"])]]
    assert marks[: len(significant)] == ["yes"] * len(significant)  # the answer first
    assert "  no" not in table
    assert main([*argv, "--all"]) == 0
    every = capsys.readouterr().out
    hidden = len(document["items"]) - len(significant)
    assert every.count("  no\n") == hidden  # --all shows the strings that are not significant
    assert hidden > 0 and "--all shows them" in table  # the data holds strings below the bar


def test_a_sketch_campaign_is_estimated_against_its_candidates(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["estimate", "--db", str(db), "--campaign", "terms"]) == 0
    document = json.loads(capsys.readouterr().out)
    items = {item["value"]: item for item in document["items"]}
    assert set(items) == {"ok", "é", "", "absent"}
    assert all(items[v]["significant"] for v in HELD) and not items["absent"]["significant"]
