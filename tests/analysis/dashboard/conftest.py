"""Fixtures: a seeded collector database, the dashboard app on it, and real processes.

``seeded_db`` writes campaigns and perturbed reports straight through ``collector.storage``
(fast, for unit tests). ``servers`` starts a real collector (``ldp-collector serve``) and a real
dashboard (``ldp-analyze dashboard``, gunicorn: :mod:`analysis.dashboard.process`) on free
loopback ports, for the browser tests.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from analysis.dashboard import create_app
from analysis.dashboard.process import DashboardProcess  # re-exported for the tests
from client_sdk.mechanisms import mechanism_from_config
from collector.process import CollectorProcess
from collector.storage import Storage

TOKEN = "dashboard-test-token-" + "y" * 16
LABELS = ["red", "green", "blue", "cyan", "magenta"]
WEIGHTS = np.array([0.4, 0.25, 0.15, 0.12, 0.08])

COLORS: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 5},
    "domain": LABELS,
    "min_batch_size": 100,
}
LATENCY: dict[str, Any] = {
    "name": "latency",
    "mechanism": {"mechanism": "duchi", "epsilon": 1.0, "lower": 0.0, "upper": 10.0},
    "min_batch_size": 100,
}
SMALL: dict[str, Any] = {
    "name": "small",
    "mechanism": {"mechanism": "oue", "epsilon": 1.0, "k": 4},
    "domain": ["a", "b", "c", "d"],
    "min_batch_size": 1000,
}


def wire_reports(config: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` perturbed reports ``{"id", "payload"}`` of a skewed population (seeded)."""
    mechanism = mechanism_from_config(config)
    rng = np.random.default_rng(seed)
    if "k" in config:
        k = int(config["k"])
        weights = WEIGHTS[:k] / WEIGHTS[:k].sum()
        values: Any = rng.choice(k, size=n, p=weights)
    else:
        values = rng.uniform(2.0, 6.0, size=n)
    payloads = mechanism.to_wire(mechanism.perturb(values, rng=rng))
    return [{"id": secrets.token_hex(16), "payload": p} for p in payloads]


def store(db: Path, campaign: dict[str, Any], n: int, *, seed: int, day: str | None = None) -> None:
    with Storage(db) as storage:
        storage.create_campaign(campaign)
        rows = [
            (r["id"], json.dumps(r["payload"]))
            for r in wire_reports(campaign["mechanism"], n, seed)
        ]
        storage.insert_reports(campaign["name"], rows, day=day)


# One campaign of every kind of estimate beyond frequencies and means (``Mechanism.estimate_kind``):
# name -> (campaign document, values drawn from a seeded generator).
_WORDS = [f"w{i:02d}" for i in range(1, 41)]
KIND_CAMPAIGNS: dict[str, dict[str, Any]] = {
    "discovery": {
        "name": "search",
        "mechanism": {"mechanism": "pem", "epsilon": 6.0, "max_length": 3, "step_bits": 6},
    },
    "sketch": {
        "name": "terms",
        "mechanism": {"mechanism": "cms", "epsilon": 4.0, "m": 256, "hashes": 4, "max_length": 8},
        "domain": ["w01", "w02", "w03", "absent"],
    },
    "distribution": {
        "name": "load",
        "mechanism": {
            "mechanism": "square_wave",
            "epsilon": 2.0,
            "lower": 0.0,
            "upper": 10.0,
            "bins": 16,
        },
    },
    "range": {
        "name": "buckets",
        "mechanism": {"mechanism": "hierarchical", "epsilon": 2.0, "k": 16},
        "domain": [f"b{i}" for i in range(16)],
    },
    "multi": {
        "name": "devices",
        "mechanism": {
            "mechanism": "multi",
            "epsilon": 2.0,
            "protocol": "smp",
            "attributes": [{"name": "os", "k": 3}, {"name": "version", "k": 2}],
            "marginals": [["os", "version"]],
        },
    },
    "fourier": {
        "name": "toggles",
        "mechanism": {
            "mechanism": "fourier",
            "epsilon": 2.0,
            "attributes": [{"name": "wifi"}, {"name": "dark"}, {"name": "beta"}],
            "order": 2,
        },
    },
    "key-value": {
        "name": "settings",
        "mechanism": {"mechanism": "pckv", "epsilon": 2.0, "k": 6, "padding": 2},
    },
}


def kind_values(kind: str, n: int, rng: np.random.Generator) -> Any:
    """``n`` true values for the campaign of ``kind`` in :data:`KIND_CAMPAIGNS`."""
    if kind in ("discovery", "sketch"):
        return [_WORDS[i] for i in np.minimum(rng.zipf(1.5, n), len(_WORDS)) - 1]
    if kind == "distribution":
        return rng.uniform(2.0, 6.0, n)
    if kind == "range":
        return rng.integers(0, 8, n)
    if kind == "multi":
        return np.stack([rng.choice(3, n, p=[0.5, 0.4, 0.1]), rng.integers(0, 2, n)], axis=1)
    if kind == "fourier":
        wifi = rng.random(n) < 0.7
        return np.stack([wifi, wifi & (rng.random(n) < 0.6), rng.random(n) < 0.2], axis=1).astype(
            int
        )
    keys = rng.integers(0, 6, n)
    return [{int(k): float(np.clip(0.3 * k - 0.8 + rng.normal(0, 0.2), -1, 1))} for k in keys]


def store_kinds(db: Path, n: int = 4000, *, seed: int = 21) -> None:
    """Every campaign of :data:`KIND_CAMPAIGNS` with ``n`` perturbed reports (min batch 100)."""
    rng = np.random.default_rng(seed)
    with Storage(db) as storage:
        for kind, campaign in KIND_CAMPAIGNS.items():
            storage.create_campaign({**campaign, "min_batch_size": 100})
            mechanism = mechanism_from_config(campaign["mechanism"])
            payloads = mechanism.to_wire(mechanism.perturb(kind_values(kind, n, rng), rng=rng))
            rows = [(secrets.token_hex(16), json.dumps(p)) for p in payloads]
            storage.insert_reports(campaign["name"], rows)


@pytest.fixture(scope="module")
def kinds_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("kinds") / "collector.db"
    store_kinds(db)
    return db


@pytest.fixture
def seeded_db(tmp_path: Path) -> Path:
    db = tmp_path / "collector.db"
    store(db, COLORS, 1500, seed=1, day="2026-11-30")
    store(db, COLORS, 1000, seed=2, day="2026-12-01")
    store(db, LATENCY, 800, seed=3)
    store(db, SMALL, 40, seed=4)
    return db


@pytest.fixture
def app(seeded_db: Path) -> Flask:
    application = create_app(seeded_db, TOKEN)
    application.testing = True
    return application


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as test_client:
        yield test_client


def login_csrf(client: FlaskClient, base_url: str = "http://localhost") -> str:
    page = client.get("/login", base_url=base_url).get_data(as_text=True)
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


def sign_in(client: FlaskClient, token: str = TOKEN, base_url: str = "http://localhost") -> Any:
    csrf = login_csrf(client, base_url)
    return client.post(
        "/login", data={"csrf": csrf, "token": token}, base_url=base_url, follow_redirects=False
    )


# ---- real processes ------------------------------------------------------------------------------


def upload(collector: CollectorProcess, campaign: str, reports: list[dict[str, Any]]) -> None:
    """Upload reports to the collector over HTTP, as devices do."""
    config_id = requests.get(f"{collector.url}/v1/campaigns/{campaign}", timeout=30).json()[
        "config_id"
    ]
    for start in range(0, len(reports), 1000):
        response = requests.post(
            f"{collector.url}/v1/campaigns/{campaign}/reports",
            json={"config_id": config_id, "reports": reports[start : start + 1000]},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json()["accepted"] == len(reports[start : start + 1000])


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[CollectorProcess, DashboardProcess]]:
    root = tmp_path_factory.mktemp("dashboard")
    collector = CollectorProcess(root / "collector.db", workers=2, log_dir=root, token=TOKEN)
    collector.start()
    dashboard = DashboardProcess(collector.db, TOKEN, root)
    try:
        for campaign in (COLORS, LATENCY, SMALL):
            collector.create_campaign(campaign)
        upload(collector, "colors", wire_reports(COLORS["mechanism"], 3000, seed=10))
        upload(collector, "latency", wire_reports(LATENCY["mechanism"], 600, seed=11))
        upload(collector, "small", wire_reports(SMALL["mechanism"], 30, seed=12))
        dashboard.start(timeout=60)
        yield collector, dashboard
    finally:
        dashboard.stop()
        collector.stop()
