"""Secure-aggregation campaigns in the collector's database (collector.storage, migration 10):
a database of the previous schema keeps every campaign, row id and reference when the
campaigns table is rebuilt, and then stores DAP campaigns beside the others."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from client_sdk.dap.campaign import b64encode, dap_object
from client_sdk.dap.messages import HpkeConfig
from collector.migrations import MIGRATIONS, SCHEMA_VERSION
from collector.storage import (
    CampaignConflict,
    SecureAggregationCampaign,
    Storage,
    StoredCampaign,
    StoredDapCampaign,
)

LABELS = ["a", "b", "c", "d"]
LDP = {"name": "colors", "mechanism": {"mechanism": "grr", "epsilon": 1, "k": 4}, "domain": LABELS}


def dap_campaign(name: str = "crashes", **fields: Any) -> dict[str, Any]:
    task = {
        "task_id": b64encode(bytes(range(32))),
        "task_info": "crashes",
        "leader": "https://leader.example/dap",
        "helper": "https://helper.example/dap",
        "vdaf": {"type": "histogram", "length": 4, "chunk_length": 2},
        "min_batch_size": 100,
        "time_precision": 3600,
        "dp": "laplace:1",
    }
    leader = HpkeConfig(1, 0x20, 1, 1, bytes([1] * 32))
    helper = HpkeConfig(2, 0x20, 1, 1, bytes([2] * 32))
    return {"name": name, "dap": dap_object(task, leader, helper), "domain": LABELS, **fields}


def _previous_schema(path: Path) -> None:
    """A database at schema version 9 (before DAP campaigns) with a campaign, a report,
    counters and a closed mark."""
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied TEXT NOT NULL)"
    )
    for version, name, migration in MIGRATIONS[:9]:
        migration(db)
        db.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", [version, name])
    db.execute(
        "INSERT INTO campaigns VALUES (7, 'old', 'c0', '{}', NULL, NULL, 5, 't', NULL, NULL)"
    )
    db.execute("INSERT INTO reports (campaign_id, report_id, payload, day) VALUES (7, ?, '1', 'd')", ["0" * 32])  # fmt: skip  # noqa: E501
    db.execute("INSERT INTO counters VALUES (7, 'accepted', '', 1)")
    db.execute("INSERT INTO closed_campaigns VALUES (7, 'then')")
    db.conn.commit()
    db.conn.close()


def test_migration_10_keeps_campaigns_and_their_references(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    _previous_schema(path)
    with Storage(path) as storage:
        conn = storage.db.conn
        version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        assert version == SCHEMA_VERSION
        assert conn.execute("SELECT id, name, mechanism FROM campaigns").fetchall() == [
            (7, "old", "{}")
        ]
        joined = conn.execute(
            "SELECT c.name, count(*) FROM reports r JOIN campaigns c ON c.id = r.campaign_id"
        ).fetchall()
        assert joined == [("old", 1)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # Foreign keys are enforced again after the rebuild.
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            conn.execute("INSERT INTO counters VALUES (99, 'accepted', '', 1)")
        # A row is a mechanism campaign or a DAP one, never both or neither.
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute(
                "INSERT INTO campaigns (name, config_id, mechanism, min_batch_size, created, dap) "
                "VALUES ('both', 'x', '{}', 1, 't', '{}')"
            )
        campaign, created = storage.create_campaign(dap_campaign())
        assert created and isinstance(campaign, StoredDapCampaign)


def test_dap_and_ldp_campaigns_side_by_side(tmp_path: Path) -> None:
    with Storage(tmp_path / "c.db") as storage:
        storage.create_campaign(LDP)
        campaign, created = storage.create_campaign(dap_campaign(owner="ops"))
        assert created and isinstance(campaign, StoredDapCampaign)
        again, created = storage.create_campaign(dap_campaign(owner="ops"))
        assert not created and again == campaign
        with pytest.raises(CampaignConflict, match="metadata"):
            storage.create_campaign(dap_campaign(owner="someone else"))
        with pytest.raises(CampaignConflict, match="immutable"):
            storage.create_campaign({**LDP, "name": "crashes"})
        with pytest.raises(CampaignConflict, match="immutable"):
            storage.create_campaign(dap_campaign("colors"))
        # Reports and estimates ask get_campaign: a DAP campaign is refused, naming its Leader.
        with pytest.raises(SecureAggregationCampaign, match=r"https://leader\.example/dap/"):
            storage.get_campaign("crashes")
        assert [c.name for c in storage.list_campaigns()] == ["colors"]
        kinds = [(c.name, type(c)) for c in storage.list_all_campaigns()]
        assert kinds == [("colors", StoredCampaign), ("crashes", StoredDapCampaign)]
        assert storage.get_any_campaign("crashes").document()["owner"] == "ops"
        assert storage.close_campaign("crashes")[1]
        assert storage.get_any_campaign("crashes").status() == "closed"
        assert storage.delete_campaign("crashes") == 0
        assert [c.name for c in storage.list_all_campaigns()] == ["colors"]
