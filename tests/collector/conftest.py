"""Fixtures: an app on a temporary SQLite file, its test client, and upload helpers."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from collector import create_app

ADMIN_TOKEN = "test-admin-token-" + "x" * 16
LABELS = [f"item-{i}" for i in range(5)]
CAMPAIGN: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 5},
    "domain": LABELS,
    "min_batch_size": 10,
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "collector.db"


@pytest.fixture
def app(db_path: Path) -> Flask:
    return create_app(
        {"DB": str(db_path), "ADMIN_TOKEN": ADMIN_TOKEN, "MAX_BATCH": 50, "TESTING": True}
    )


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as test_client:
        yield test_client


@pytest.fixture
def campaign(client: FlaskClient) -> dict[str, Any]:
    response = client.post("/v1/campaigns", json=CAMPAIGN, headers=ADMIN)
    assert response.status_code == 201, response.get_json()
    return dict(response.get_json())


def new_id() -> str:
    return secrets.token_hex(16)


def stored_rows(db_path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute("SELECT report_id, payload FROM reports ORDER BY seq").fetchall()
    finally:
        conn.close()
