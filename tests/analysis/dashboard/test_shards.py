"""The dashboard over several sources: two collector databases that share some reports (a retry
that landed on the other collector) and a Parquet export of a third, merged with each report id
once. The served estimates, windows and per-day series equal ``ldp-analyze estimate`` over the
same sources; sources that disagree on a campaign's config are refused by name."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from flask.testing import FlaskClient

from analysis.cli import main
from analysis.dashboard import create_app
from analysis.dashboard.sources import Shards
from client_sdk.mechanisms import mechanism_from_config
from collector import export
from collector.storage import Storage
from tests.analysis.dashboard.conftest import (
    COLORS,
    KIND_CAMPAIGNS,
    TOKEN,
    DashboardProcess,
    kind_values,
    sign_in,
    wire_reports,
)

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
LOAD = KIND_CAMPAIGNS["distribution"]


def _rows(config: dict[str, Any], n: int, seed: int, kind: str | None = None) -> list[Any]:
    if kind is None:
        reports = wire_reports(config, n, seed)
        return [(r["id"], json.dumps(r["payload"])) for r in reports]
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(seed)
    payloads = mechanism.to_wire(mechanism.perturb(kind_values(kind, n, rng), rng=rng))
    return [(secrets.token_hex(16), json.dumps(p)) for p in payloads]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Shards a and b of ``colors`` and ``load`` (300 reports of each campaign in both, on the
    day each copy reached its collector), and a Parquet export of shard c's ``colors``."""
    root = tmp_path_factory.mktemp("shards")
    a, b, c = root / "a.db", root / "b.db", root / "c.db"
    for db in (a, b, c):
        with Storage(db) as storage:
            storage.create_campaign(COLORS)
            storage.create_campaign({**LOAD, "min_batch_size": 100})
    for campaign, kind in ((COLORS, None), (LOAD, "distribution")):
        config = campaign["mechanism"]
        shared = _rows(config, 300, seed=1, kind=kind)
        for i, (db, day) in enumerate(zip((a, b, c), DAYS, strict=True)):
            own = _rows(config, 700 + 200 * i, seed=10 + i, kind=kind)
            with Storage(db) as storage:
                storage.insert_reports(campaign["name"], own, day=day)
                if db != c:  # a and b both hold the shared copies, stored on their own days
                    storage.insert_reports(campaign["name"], shared, day=day)
    lake = root / "c-lake"
    export.export_campaign(c, "colors", lake)
    return {"dbs": [str(a), str(b)], "parquet": [str(lake)], "root": root}


def _command(shards: dict[str, Any], campaign: str, *extra: str, parquet: bool = True) -> Any:
    argv = ["estimate", "--campaign", campaign, "--format", "json"]
    for db in shards["dbs"]:
        argv += ["--db", db]
    if parquet:
        for directory in shards["parquet"]:
            argv += ["--parquet", directory]
    return argv + list(extra)


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def client(shards: dict[str, Any]) -> Any:
    app = create_app(shards["dbs"], TOKEN, parquet=shards["parquet"])
    app.testing = True
    with app.test_client() as test_client:
        assert sign_in(test_client).status_code == 303
        yield test_client


def test_the_merged_estimate_is_the_commands(
    client: FlaskClient, shards: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    served = client.get("/api/campaigns/colors").get_json()
    # a: 700 + 300 shared, b: 900 + the same 300, the export of c: 1100; each id once.
    assert served["n"] == 700 + 900 + 1100 + 300
    assert served["estimate"] == _run(capsys, _command(shards, "colors"))
    assert served["display"]["view"] == "frequencies"
    # The series: each report in the day of the copy kept (the first source's, a's).
    assert served["series"] == {"days": list(DAYS), "reports": [1000, 900, 1100]}
    listed = client.get("/api/campaigns").get_json()
    assert listed["sources"] == [f"--db {p}" for p in shards["dbs"]] + [
        f"--parquet {p}" for p in shards["parquet"]
    ]
    counts = {c["name"]: c["n"] for c in listed["campaigns"]}
    assert counts == {"colors": 3000, "load": 700 + 900 + 300}


def test_the_merged_trend_is_the_by_day_command(
    client: FlaskClient, shards: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    trend = client.get("/api/campaigns/colors").get_json()["trend"]
    expected = _run(capsys, _command(shards, "colors", "--by", "day"))
    assert trend["labels"] == list(DAYS) and trend["n"] == [1000, 900, 1100]
    for line in trend["series"]:
        frequencies = [
            next(i["frequency"] for i in day["estimate"]["items"] if i["value"] == line["label"])
            for day in expected["days"]
        ]
        assert line["values"] == frequencies, line["label"]
    # A distribution has no per-day chart (its trend is not one number a day).
    assert "trend" not in client.get("/api/campaigns/load").get_json()


def test_a_campaign_only_some_sources_hold(
    client: FlaskClient, shards: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    served = client.get("/api/campaigns/load").get_json()  # not in the export
    assert served["estimate"] == _run(capsys, _command(shards, "load", parquet=False))
    assert served["display"]["view"] == "distribution"
    assert served["display"]["chart"]["type"] == "band-line"  # the CDF, over merged shards


@pytest.mark.parametrize(
    "window",
    [("2026-11-29", "2026-11-30"), ("2026-11-28", "2026-11-28"), ("2026-11-30", None)],
)
def test_windows_over_shards_are_the_commands(
    client: FlaskClient,
    shards: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    window: tuple[str, str | None],
) -> None:
    since, until = window
    query = f"since={since}" + (f"&until={until}" if until else "")
    served = client.get(f"/api/campaigns/colors?{query}").get_json()
    flags = ["--since", since] + (["--until", until] if until else [])
    expected = _run(capsys, _command(shards, "colors", *flags))
    assert served["estimate"] == expected
    assert served["n"] == expected["n"]


def test_a_window_below_min_batch_over_shards_shows_n_only(client: FlaskClient) -> None:
    served = client.get("/api/campaigns/colors?since=2026-12-05").get_json()
    assert served == {
        "name": "colors",
        "since": "2026-12-05",
        "until": None,
        "n": 0,
        "min_batch_size": COLORS["min_batch_size"],
        "estimate_status": "withheld",
    }


def test_new_reports_in_one_shard_update_the_merged_view(
    shards: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "d.db"
    with Storage(extra) as storage:
        storage.create_campaign(COLORS)
        storage.insert_reports("colors", _rows(COLORS["mechanism"], 400, seed=40))
    dbs = [*shards["dbs"], str(extra)]
    app = create_app(dbs, TOKEN)
    with app.test_client() as test_client:
        assert sign_in(test_client).status_code == 303
        before = test_client.get("/api/campaigns/colors").get_json()["n"]
        with Storage(extra) as storage:
            storage.insert_reports("colors", _rows(COLORS["mechanism"], 250, seed=41))
        served = test_client.get("/api/campaigns/colors").get_json()
    assert served["n"] == before + 250
    argv = ["estimate", "--campaign", "colors", "--format", "json"]
    for db in dbs:
        argv += ["--db", db]
    assert served["estimate"] == _run(capsys, argv)


def test_sources_that_disagree_are_named(shards: dict[str, Any], tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with Storage(other) as storage:
        storage.create_campaign({**COLORS, "mechanism": {**COLORS["mechanism"], "epsilon": 1.0}})
    app = create_app([shards["dbs"][0], str(other)], TOKEN)
    with app.test_client() as test_client:
        assert sign_in(test_client).status_code == 303
        answer = test_client.get("/api/campaigns/colors")
        assert answer.status_code == 422
        detail = answer.get_json()["detail"]
        assert "differs between sources" in detail and str(other) in detail
        assert test_client.get("/campaigns/colors").status_code == 409
        assert test_client.get("/api/campaigns/nope").status_code == 404


@pytest.mark.slow
def test_the_command_serves_several_sources(shards: dict[str, Any]) -> None:
    process = DashboardProcess(shards["dbs"][0], TOKEN, shards["root"])
    arguments = process.arguments

    def with_more_sources() -> list[str]:
        return [*arguments(), "--db", shards["dbs"][1], "--parquet", shards["parquet"][0]]

    process.arguments = with_more_sources  # type: ignore[method-assign]
    process.start(timeout=120)
    try:
        session = requests.Session()
        page = session.get(f"{process.url}/login", timeout=30).text
        marker = 'name="csrf" value="'
        csrf = page[page.index(marker) + len(marker) :].split('"', 1)[0]
        session.post(f"{process.url}/login", data={"csrf": csrf, "token": TOKEN}, timeout=30)
        served = session.get(f"{process.url}/api/campaigns/colors", timeout=60).json()
        assert served["n"] == 3000 and served["estimate_status"] == "released"
    finally:
        process.stop()


def test_a_slow_merge_is_remade_in_the_background(
    shards: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = tmp_path / "e.db"
    with Storage(extra) as storage:
        storage.create_campaign(COLORS)
    dbs = [*shards["dbs"], str(extra)]
    backend = Shards(dbs, slow_seconds=0.0)  # every merge counts as slow
    first = backend.campaign("colors")
    assert first.n == 1900 and first.document is not None  # made at once the first time
    with Storage(extra) as storage:
        storage.insert_reports("colors", _rows(COLORS["mechanism"], 150, seed=50))
    stale = backend.campaign("colors")  # answered at once with the previous merge
    assert stale is first and stale.n == 1900
    assert stale.document is not None and stale.document["n"] == 1900
    for _ in range(600):
        if not stale.refreshing:
            break
        time.sleep(0.05)
    assert not stale.refreshing
    fresh = backend.campaign("colors")
    assert fresh.n == 2050 and fresh.document is not None
    argv = ["estimate", "--campaign", "colors", "--format", "json"]
    for db in dbs:
        argv += ["--db", db]
    assert fresh.document == _run(capsys, argv)
