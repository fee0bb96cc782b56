"""The storage module on real SQLite files: schema, campaigns, idempotent inserts, streaming."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.dataset import StoredCampaign, count_reports, iter_report_chunks, load_campaign
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.protocol import campaign_config_id
from collector.storage import (
    SCHEMA_VERSION,
    CampaignConflict,
    CampaignNotFound,
    SchemaError,
    Storage,
    StorageBusy,
    normalize_campaign,
)

LABELS = [f"label-{i}" for i in range(5)]
CAMPAIGN: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 1, "k": 5},
    "domain": LABELS,
}


def rid(i: int) -> str:
    return f"{i:032x}"


@pytest.fixture
def storage(tmp_path: Path) -> Any:
    with Storage(tmp_path / "c.db") as s:
        s.create_campaign(CAMPAIGN)
        yield s


def test_schema_is_migrated_once_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with Storage(path) as first, Storage(path) as second:
        assert first.migrate() == second.migrate() == SCHEMA_VERSION
        assert first.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = first.db.execute("SELECT version FROM schema_migrations").fetchall()
        assert [r[0] for r in rows] == list(range(1, SCHEMA_VERSION + 1))
        # Privacy hygiene: a report row holds no address, agent or precise time.
        columns = {c.name for c in first.db["reports"].columns}
        # (The nonce is random bits from inside a sealed envelope: client_sdk.sealing.)
        assert columns == {"seq", "campaign_id", "report_id", "payload", "day", "nonce"}


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    Storage(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'future', 'x')", [SCHEMA_VERSION + 1])
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError, match="newer"):
        Storage(path)


def test_read_only_open_needs_an_existing_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no collector database"):
        Storage(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(SchemaError, match="init-db"):
        Storage(tmp_path / "empty.db", create=False)


def test_campaign_is_normalised_and_its_config_id_recomputable(storage: Storage) -> None:
    campaign = storage.get_campaign("colors")
    canonical = mechanism_from_config(CAMPAIGN["mechanism"]).to_config()
    assert campaign.config == canonical
    assert campaign.config["epsilon"] == 1.0 and isinstance(campaign.config["epsilon"], float)
    assert campaign.mechanism == mechanism_from_config(canonical)
    assert campaign.domain == LABELS
    assert campaign.policy is None
    assert campaign.min_batch_size == 100
    assert campaign.config_id == campaign_config_id(
        mechanism=canonical, domain=LABELS, policy=None, min_batch_size=100
    )
    assert campaign.created.endswith("Z")
    document = campaign.document()
    assert json.loads(json.dumps(document)) == document


def test_campaign_creation_is_idempotent_and_immutable(storage: Storage) -> None:
    same = dict(CAMPAIGN, min_batch_size=100)  # the default, spelled out
    campaign, created = storage.create_campaign(same)
    assert not created
    assert campaign == storage.get_campaign("colors")
    for change in (
        {"mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 5}},
        {"domain": list(reversed(LABELS))},
        {"policy": {"epsilon_per_report": 1.0, "reports_per_period": 5, "period_seconds": 86400}},
        {"min_batch_size": 10},
    ):
        with pytest.raises(CampaignConflict, match="immutable"):
            storage.create_campaign(dict(CAMPAIGN, **change))
    assert [c.name for c in storage.list_campaigns()] == ["colors"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "JSON object"),
        ({"mechanism": CAMPAIGN["mechanism"], "domain": LABELS}, "missing the field 'name'"),
        ({"name": "x", "domain": LABELS}, "missing the field 'mechanism'"),
        (dict(CAMPAIGN, extra=1), "unknown field"),
        (dict(CAMPAIGN, name="has space"), "name must be"),
        (dict(CAMPAIGN, name=""), "name must be"),
        (dict(CAMPAIGN, name=7), "name must be"),
        (dict(CAMPAIGN, mechanism={"mechanism": "nope"}), "mechanism: mechanism must be one of"),
        (dict(CAMPAIGN, mechanism={"mechanism": "grr", "epsilon": -1, "k": 5}), "epsilon"),
        (dict(CAMPAIGN, mechanism=[1]), "mechanism: "),
        (dict(CAMPAIGN, domain=LABELS[:4]), "k=5 labels; got 4"),
        (dict(CAMPAIGN, domain=None), "domain must be a list of 5 labels"),
        (dict(CAMPAIGN, domain=[*LABELS[:4], 4]), r"domain\[4\] must be a string"),
        (dict(CAMPAIGN, domain=[*LABELS[:4], LABELS[0]]), "'label-0' appears twice"),
        (dict(CAMPAIGN, policy=[1]), "policy must be a JSON object"),
        (dict(CAMPAIGN, min_batch_size=0), "min_batch_size"),
        (dict(CAMPAIGN, min_batch_size=True), "min_batch_size"),
        (dict(CAMPAIGN, min_batch_size=2.0), "min_batch_size"),
        (dict(CAMPAIGN, policy={"x": float("nan")}), "policy is missing"),
        (dict(CAMPAIGN, policy={"retention_days": 30}), "policy is missing epsilon_per_report"),
        (
            dict(
                CAMPAIGN,
                policy={"epsilon_per_report": 1.0, "reports_per_period": 0, "period_seconds": 60},
            ),
            "policy.reports_per_period",
        ),
    ],
)
def test_invalid_campaigns_are_refused_naming_the_field(document: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalize_campaign(document)


def test_unknown_campaign_is_a_lookup_error_naming_it(storage: Storage) -> None:
    for call in (
        lambda: storage.get_campaign("nope"),
        lambda: storage.count_reports("nope"),
        lambda: storage.insert_reports("nope", [(rid(1), "1")]),
        lambda: list(storage.iter_report_chunks("nope")),
    ):
        with pytest.raises(CampaignNotFound, match="'nope'") as info:
            call()
        assert isinstance(info.value, LookupError)


def test_duplicates_are_ignored_first_copy_wins_and_counted(storage: Storage) -> None:
    first = storage.insert_reports(
        "colors", [(rid(1), "1"), (rid(2), "2"), (rid(1), "3")], rejected={"invalid_id": 2}
    )
    assert (first.accepted, first.duplicate) == (2, 1)
    second = storage.insert_reports("colors", [(rid(2), "4"), (rid(3), "0")])
    assert (second.accepted, second.duplicate) == (1, 1)
    rows = storage.db.execute("SELECT report_id, payload FROM reports ORDER BY seq").fetchall()
    assert rows == [(rid(1), "1"), (rid(2), "2"), (rid(3), "0")]
    assert storage.counters() == [
        ("colors", "accepted", "", 3),
        ("colors", "duplicate", "", 2),
        ("colors", "rejected", "invalid_id", 2),
    ]
    assert storage.report_counts() == {"colors": 3}


def test_report_ids_are_per_campaign(storage: Storage) -> None:
    storage.create_campaign(dict(CAMPAIGN, name="other"))
    assert storage.insert_reports("colors", [(rid(1), "1")]).accepted == 1
    assert storage.insert_reports("other", [(rid(1), "1")]).accepted == 1


def test_insert_refuses_unvalidated_rows_and_writes_nothing(storage: Storage) -> None:
    with pytest.raises(ValueError, match="32 lowercase hex"):
        storage.insert_reports("colors", [(rid(1), "1"), ("ABC", "1")])
    assert storage.count_reports("colors") == 0


def test_day_bucket_is_coarse(storage: Storage) -> None:
    storage.insert_reports("colors", [(rid(1), "1")])
    storage.insert_reports("colors", [(rid(2), "1")], day="2024-01-02")
    days = [r[0] for r in storage.db.execute("SELECT day FROM reports ORDER BY seq").fetchall()]
    assert len(days[0]) == 10 and days[0][4] == "-"
    assert days[1] == "2024-01-02"


def test_busy_database_raises_storage_busy_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with Storage(path) as setup:
        setup.create_campaign(CAMPAIGN)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Storage(path, busy_timeout=0.05) as s:
            with pytest.raises(StorageBusy):
                s.insert_reports("colors", [(rid(1), "1")])
            with pytest.raises(StorageBusy):
                s.check_writable()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with Storage(path) as s:
        assert s.count_reports("colors") == 0
        s.check_writable()


def test_stream_and_dataset_api_decode_every_report(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    mechanism = mechanism_from_config(CAMPAIGN["mechanism"])
    reports = mechanism.perturb(np.arange(1234) % 5, rng=np.random.default_rng(1))
    payloads = mechanism.to_wire(reports)
    with Storage(path) as s:
        s.create_campaign(CAMPAIGN)
        s.insert_reports("colors", [(rid(i), json.dumps(p)) for i, p in enumerate(payloads)])
    campaign = load_campaign(path, "colors")
    assert isinstance(campaign, StoredCampaign)
    assert count_reports(path, "colors") == 1234
    chunks = list(iter_report_chunks(path, "colors", chunk_size=500))
    assert [len(c) for c in chunks] == [500, 500, 234]
    np.testing.assert_array_equal(np.concatenate(chunks), reports)
    with pytest.raises(LookupError, match="'absent'"):
        load_campaign(path, "absent")
    with pytest.raises(ValueError, match="chunk_size"):
        list(iter_report_chunks(path, "colors", chunk_size=0))


def test_export_pages_by_cursor(storage: Storage) -> None:
    storage.insert_reports("colors", [(rid(i), str(i % 5)) for i in range(25)])
    seen: list[tuple[str, str]] = []
    after, pages = 0, 0
    while True:
        page = storage.export_page("colors", after=after, limit=10)
        rows = [row for chunk in storage.export_rows(page, chunk_size=3) for row in chunk]
        seen += rows
        pages += 1
        after = page.cursor
        if not page.has_more:
            break
    assert pages == 3
    assert seen == [(rid(i), str(i % 5)) for i in range(25)]
    # Resuming from the last cursor later picks up only new reports.
    storage.insert_reports("colors", [(rid(99), "4")])
    page = storage.export_page("colors", after=after, limit=10)
    assert list(storage.export_rows(page)) == [[(rid(99), "4")]]
    assert not page.has_more
    empty = storage.export_page("colors", after=page.cursor, limit=10)
    assert list(storage.export_rows(empty)) == [] and empty.cursor == page.cursor


SHUFFLED: dict[str, Any] = {
    "name": "s",
    "mechanism": {"mechanism": "grr", "k": 4},
    "domain": ["a", "b", "c", "d"],
    "shuffle": {"min_batch": 3, "central_epsilon": 1.0, "delta": 1e-6},
}


def test_a_batch_in_parts_is_one_batch_each_part_stored_once(storage: Storage) -> None:
    storage.create_campaign(SHUFFLED)
    rows = [(rid(i), "1") for i in range(1, 7)]
    batch = "c" * 32
    first, _, replayed = storage.insert_batch("s", batch, rows[:2], size=2, part=(0, 2, 6))
    assert (first.accepted, replayed) == (2, False)
    again, _, replayed = storage.insert_batch("s", batch, rows[:2], size=2, part=(0, 2, 6))
    assert (again.accepted, again.duplicate, replayed) == (2, 0, True)  # answered as before
    # Cut differently after a restart: the overlap is duplicate, and no size counts twice.
    second, _, _ = storage.insert_batch("s", batch, rows[:4], size=4, part=(0, 4, 6))
    assert (second.accepted, second.duplicate) == (2, 2)
    storage.insert_batch("s", batch, rows[4:], size=2, part=(4, 2, 6))
    assert storage.batch_sizes("s") == [6] and storage.count_reports("s") == 6
    with pytest.raises(ValueError, match=r"part\.total is 7, but batch c+ was 6"):
        storage.insert_batch("s", batch, rows[5:], size=1, part=(5, 1, 7))
    with pytest.raises(ValueError, match="was sent in parts"):  # never replayed as a whole
        storage.insert_batch("s", batch, rows, size=6)


def test_a_shuffled_campaign_must_fit_min_batch_in_one_request(storage: Storage) -> None:
    big = {
        **SHUFFLED,
        "name": "wide",
        "mechanism": {"mechanism": "oue", "k": 1024},
        "domain": [f"v{i}" for i in range(1024)],
        "shuffle": {"min_batch": 400, "central_epsilon": 1.0, "delta": 1e-6},
    }
    with pytest.raises(ValueError, match=r"shuffle\.min_batch 400: .* over the collector's body"):
        storage.create_campaign(big, max_body=100_000)
    created, _ = storage.create_campaign(big, max_body=1_000_000)
    assert created.name == "wide" and storage.batch_sizes("wide") == []


def test_a_stored_campaign_carries_its_row_id_and_closing_time(storage: Storage) -> None:
    stored = storage.get_campaign("colors")
    assert isinstance(stored.id, int) and stored.closed_at is None
    closed, _ = storage.close_campaign("colors")
    again = storage.get_campaign("colors")
    assert again.closed_at == closed and again.id == stored.id
    assert [c.closed_at for c in storage.list_campaigns()] == [closed]
    assert again == stored  # closing changes no part of the campaign's content


def test_inserting_for_a_stored_campaign_does_not_look_it_up_again(storage: Storage) -> None:
    stored = storage.get_campaign("colors")
    statements: list[str] = []
    storage.db.conn.set_trace_callback(statements.append)
    try:
        result = storage.insert_reports(stored, [(rid(1), "0")])
    finally:
        storage.db.conn.set_trace_callback(None)
    assert result.accepted == 1 and storage.count_reports("colors") == 1
    assert not [s for s in statements if "FROM campaigns" in s], statements
