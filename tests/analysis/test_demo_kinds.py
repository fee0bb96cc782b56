"""``ldp-demo --collector URL --campaign NAME`` feeds every kind of campaign a real collector
process serves, and its truth is found by the estimate.

One collector subprocess (``collector.process.CollectorProcess``); one campaign of each kind;
seeded populations and seeded randomization (``feed_collector(rng=...)``), so every run sees the
same reports. Each truth quantity must lie within ``Z`` standard errors of its estimate (the
interval's half-width over 1.96)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.demo import FeedResult, estimated, feed_collector, main
from collector.process import CollectorProcess

DEVICES = 2_000
Z = 4.0
"""Tolerance in standard errors per quantity (about 1 in 16,000 per quantity by chance)."""
STRINGS = {"max_length": 8}
CAMPAIGNS: dict[str, dict[str, Any]] = {
    "labels": {
        "mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 4},
        "domain": ["light", "dark", "system", "auto"],
        "policy": {"epsilon_per_report": 2.0, "reports_per_period": 2, "period_seconds": 86400},
    },
    "minutes": {"mechanism": {"mechanism": "hybrid", "epsilon": 1.0, "lower": 0, "upper": 120}},
    "latency": {
        "mechanism": {
            "mechanism": "square_wave",
            "epsilon": 1.0,
            "lower": 0,
            "upper": 10,
            "bins": 16,
        }
    },
    "ranges": {
        "mechanism": {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16},
        "domain": [f"{i}-{i + 1} s" for i in range(16)],
    },
    "settings": {"mechanism": {"mechanism": "pckv", "epsilon": 2.0, "k": 6, "padding": 2}},
    "devices": {
        "mechanism": {
            "mechanism": "multi",
            "epsilon": 2.0,
            "protocol": "smp",
            "attributes": [
                {"name": "os", "k": 3, "labels": ["android", "ios", "web"]},
                {"name": "tablet", "k": 2},
            ],
        }
    },
    "flags": {
        "mechanism": {
            "mechanism": "fourier",
            "epsilon": 1.0,
            "attributes": [{"name": "wifi"}, {"name": "dark"}],
            "order": 2,
        }
    },
    "search-pem": {
        "mechanism": {
            "mechanism": "pem",
            "epsilon": 4.0,
            "alphabet": "abcdefghijklmnopqrstuvwxyz",
            **STRINGS,
        }
    },
    "search-sfp": {
        "mechanism": {"mechanism": "sfp", "epsilon": 4.0, "m": 1024, "hashes": 4, **STRINGS}
    },
    "search-cms": {
        "mechanism": {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, **STRINGS}
    },
    "search-hcms": {
        "mechanism": {"mechanism": "hcms", "epsilon": 4.0, "m": 256, "hashes": 4, **STRINGS}
    },
    "search-rappor": {
        "mechanism": {
            "mechanism": "rappor",
            "k": 32,
            "h": 2,
            "m": 8,
            "f": 0.5,
            "p": 0.25,
            "q": 0.75,
        }
    },
}


CHECKED = {"latency": 1, "search-pem": 1, "search-sfp": 1}
"""Campaigns whose estimate has fewer quantities with intervals than the truth rows: a
distribution's median has no interval in it; discovery (PEM, SFP) at this n finds the heaviest
simulated words, not all ten."""


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CollectorProcess]:
    root = tmp_path_factory.mktemp("demo-kinds")
    with CollectorProcess(root / "collector.db", workers=1, log_dir=root) as process:
        for name, document in CAMPAIGNS.items():
            process.create_campaign({"name": name, "min_batch_size": 10, **document})
        yield process


def _checked(result: FeedResult) -> int:
    """How many truth quantities the estimate had; fails on one outside Z standard errors."""
    assert result.estimate is not None
    checked = 0
    for quantity, truth in result.truth:
        found = estimated(result.estimate, quantity)
        if found is None or math.isnan(found[1]):
            continue
        value, low, high = found
        std_error = (high - low) / (2 * 1.959964)
        assert abs(value - truth) <= Z * std_error, (quantity, truth, found)
        checked += 1
    return checked


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
def test_every_kind_is_fed_accepted_and_estimated_near_its_truth(
    collector: CollectorProcess, name: str
) -> None:
    result = feed_collector(
        collector.url,
        name,
        devices=DEVICES,
        reports_per_device=2,
        seed=3,
        db=collector.db,
        rng=np.random.default_rng(11),
    )
    # grr's policy allows 2 reports a device; the others have no policy and send 2 too.
    assert result.reports == result.accepted == 2 * DEVICES
    assert result.truth
    assert _checked(result) >= CHECKED.get(name, len(result.truth)), (name, result.estimate)


def test_the_collector_estimate_endpoint_is_read_with_the_admin_token(
    collector: CollectorProcess,
) -> None:
    result = feed_collector(
        collector.url,
        "labels",
        devices=500,
        seed=5,
        token=collector.token,
        rng=np.random.default_rng(2),
    )
    assert result.estimate is not None and result.estimate["campaign"] == "labels"
    assert _checked(result) == 4


def test_the_cli_prints_the_truth_beside_the_estimate_for_a_string_file(
    collector: CollectorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = tmp_path / "terms.txt"
    words.write_text("weather\n" * 6 + "news\n" * 3 + "maps\n", encoding="utf-8")
    code = main(
        [
            "--collector",
            collector.url,
            "--campaign",
            "search-cms",
            "--devices",
            "600",
            "--values",
            str(words),
            "--db",
            collector.db,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split()[2]: line.split() for line in out.splitlines() if "frequency of" in line}
    assert set(rows) == {"'weather'", "'news'", "'maps'"}
    assert [float(rows[w][3]) for w in ("'weather'", "'news'", "'maps'")] == [0.6, 0.3, 0.1]
    assert all(len(row) >= 5 for row in rows.values())  # an estimate beside each truth


def test_values_file_is_refused_for_a_campaign_that_takes_no_strings(
    collector: CollectorProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = tmp_path / "terms.txt"
    words.write_text("weather\n", encoding="utf-8")
    code = main(["--collector", collector.url, "--campaign", "labels", "--values", str(words)])
    assert code == 2
    assert "--values" in capsys.readouterr().err


def test_each_demo_writes_its_own_report_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default report is named by mechanism and mode; ``--report PATH`` overrides it."""
    import analysis.demo as demo

    seen: list[Any] = []

    def fake_run(**options: Any) -> None:
        seen.append(options["report_path"])
        raise RuntimeError("stop before running")  # main prints it and returns 2

    monkeypatch.setattr(demo, "run_demo", fake_run)
    assert main([]) == 2
    assert main(["--shuffle"]) == 2
    assert main(["--mechanism", "oue"]) == 2
    assert main(["--report", "mine.html"]) == 2
    assert main(["--report", ""]) == 2
    assert seen == [
        "ldp-demo-report-olh.html",
        "ldp-demo-report-grr-shuffled.html",
        "ldp-demo-report-oue.html",
        "mine.html",
        None,
    ]
