"""The shuffler's database: fresh ids by a keyed digest, batches only from min_batch, an order
independent of arrival (a rank-correlation test), deletion only of the acknowledged batch; the
forwarder's batch sizes and its maximum wait."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from shuffler.forwarder import Forwarder
from shuffler.storage import (
    ARRIVAL_GRANULARITY,
    PendingFull,
    ShufflerStorage,
    batch_sizes,
    csprng_permutation,
)

Z_LIMIT = 4.0
"""|z| beyond 4 for an independent order has probability 6.3e-5 (two-sided normal)."""


def _report(i: int) -> tuple[str, str, str]:
    return f"{i:032x}", "0" * 16, f"marker{i:06d}"


def test_nothing_is_batched_below_min_batch_and_retries_keep_their_fresh_id(
    tmp_path: Path,
) -> None:
    with ShufflerStorage(tmp_path / "s.db") as storage:
        reports = [_report(i) for i in range(9)]
        assert storage.accept("c", "cfg", reports) == (9, 0)
        assert storage.accept("c", "cfg", reports[:3] + [_report(50)] * 2) == (1, 4)
        assert storage.form_batch("c", "cfg", 11) is None
        assert storage.pending_counts() == {"c": 10} and "c" in storage.waiting_since()
        storage.accept("c", "cfg", [_report(99)])
        batch_id = storage.form_batch("c", "cfg", 11)
        assert batch_id is not None and storage.pending_counts() == {}
        assert storage.waiting_since() == {}  # the pool is empty: its time is forgotten
        (batch,) = storage.open_batches()
        assert batch.batch_id == batch_id and batch.size == 11 and storage.in_flight() == 11
        body = json.loads(batch.body)
        assert body["batch_id"] == batch_id and body["config_id"] == "cfg"
        assert sorted(r["payload"]["sealed"] for r in body["reports"]) == sorted(
            r[2] for r in [*reports, _report(50), _report(99)]
        )
        forwarded = {r["payload"]["sealed"]: r["id"] for r in body["reports"]}
        device_ids = {r[0] for r in reports}
        assert not device_ids & set(forwarded.values())  # fresh ids
        assert storage.delete_batch(batch_id) == 11 and storage.open_batches() == []
        # A device retrying a forwarded report (its acknowledgment was lost) sends it again under
        # the same fresh id, which the collector answers as a duplicate: nothing is remembered.
        assert storage.accept("c", "cfg", reports[:1]) == (1, 0)
        again = storage.form_batch("c", "cfg", 1)
        assert again is not None
        (retry,) = json.loads(storage.open_batches()[0].body)["reports"]
        assert retry["id"] == forwarded[reports[0][2]]
        # Another campaign's report of the same device id gets another fresh id.
        assert storage.fresh_id("d", reports[0][0]).hex() != retry["id"]
    raw = (tmp_path / "s.db").read_bytes()
    assert f"{5:032x}".encode() not in raw  # device ids are never stored
    conn = sqlite3.connect(tmp_path / "s.db")
    columns = {
        table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    conn.close()
    # Nothing about senders: no address, agent, rowid order; of arrival, only the minute (what
    # the maximum age needs).
    fields = ["campaign", "config_id", "fresh_id", "key_id", "sealed", "arrived"]
    assert columns["waiting"] == fields
    assert columns["pools"] == ["campaign", "since", "pending"]
    assert columns["forwarder"] == ["one", "restarts", "down_since", "last_exit"]
    # Who holds a waiting report (a keyed digest of its credential), only while it waits.
    assert columns["holders"] == ["campaign", "config_id", "fresh_id", "credential", "quota"]
    assert set(columns) == {
        "meta",
        "waiting",
        "pools",
        "batches",
        "forwarder",
        "holders",
        "expired",
    }


def test_a_credential_holds_at_most_its_quota_of_waiting_reports(tmp_path: Path) -> None:
    """``accept_held``: past the quota, reports are deferred (not stored); a retry of a waiting
    report is a duplicate; a formed batch frees its holders and says how it was metered."""
    with ShufflerStorage(tmp_path / "s.db") as storage:
        flood = [_report(i) for i in range(10)]
        assert storage.accept_held("c", "cfg", flood, credential=b"a", quota=1) == (
            1,
            0,
            list(range(1, 10)),
        )
        assert storage.accept_held("c", "cfg", flood[:2], credential=b"a", quota=1) == (0, 1, [1])
        assert storage.accept_held("d", "cfg", flood[:1], credential=b"a", quota=1) == (1, 0, [])
        assert storage.accept_held("c", "cfg", [_report(20)], credential=b"b", quota=2) == (
            1,
            0,
            [],
        )
        storage.accept("c", "cfg", [_report(30)])  # a report without a credential
        assert storage.waiting() == {("c", "cfg"): 3, ("d", "cfg"): 1}
        assert storage.form_batch("c", "cfg", 3) is not None
        body = json.loads(storage.open_batches()[0].body)
        assert body["credentials"] == {"per_credential": 2, "uncredentialed": 1}
        # The batch left: credential a may have one waiting report of campaign c again.
        assert storage.accept_held("c", "cfg", flood[1:3], credential=b"a", quota=1) == (1, 0, [1])
        rows = storage.conn.execute("SELECT count(*) FROM holders").fetchone()[0]
        assert rows == 2  # a's new report of c, and its report of d
        assert storage.form_batch("d", "cfg", 1) is not None
        bodies = {b.campaign: json.loads(b.body) for b in storage.open_batches()}
        assert bodies["d"]["credentials"] == {"per_credential": 1, "uncredentialed": 0}
        storage.accept_held("f", "old", [_report(50)], credential=b"a", quota=1)
        assert storage.drop_waiting("f", "old") == 1  # a configuration no longer served
        assert storage.accept_held("f", "new", [_report(51)], credential=b"a", quota=1)[0] == 1
        storage.accept("e", "cfg", [_report(40)])
        storage.form_batch("e", "cfg", 1)
        plain = [json.loads(b.body) for b in storage.open_batches() if b.campaign == "e"]
        assert "credentials" not in plain[0]  # no credential: nothing claimed


def test_the_forwarded_order_is_independent_of_the_arrival_order(tmp_path: Path) -> None:
    """Spearman's rho between arrival and forwarded position: under independence
    rho sqrt(n - 1) is about N(0, 1), so |z| > 4 happens with probability 6.3e-5."""
    n = 2000
    with ShufflerStorage(tmp_path / "s.db") as storage:
        for start in range(0, n, 100):  # arrivals in 20 uploads
            storage.accept("c", "cfg", [_report(i) for i in range(start, start + 100)])
        assert storage.form_batch("c", "cfg", n) is not None
        (batch,) = storage.open_batches()
    reports = json.loads(batch.body)["reports"]
    arrival = np.array([int(r["payload"]["sealed"][6:]) for r in reports])
    assert sorted(arrival.tolist()) == list(range(n))
    rho = np.corrcoef(arrival, np.arange(n))[0, 1]  # ranks already: both are permutations
    assert abs(rho * math.sqrt(n - 1)) < Z_LIMIT


def test_the_permutation_is_uniform_on_three_items() -> None:
    """All 6 orders of 3 items equally likely: chi-square, 5 degrees of freedom, 30000 draws;
    the 1e-4 critical value is 25.74."""
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(30_000):
        key = tuple(csprng_permutation(3).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    chi2 = sum((c - 5_000) ** 2 / 5_000 for c in counts.values())
    assert chi2 < 25.74


@pytest.mark.parametrize(
    ("waiting", "min_batch", "max_batch"),
    [
        (w, m, x)
        for w in (0, 1, 99, 100, 101, 199, 250, 999, 1000, 5001)
        for m, x in ((100, 100), (100, 150), (100, 199), (100, 200), (100, 1000), (2, 7))
    ],
)
def test_batch_sizes_never_go_below_min_batch_nor_above_max_batch(
    waiting: int, min_batch: int, max_batch: int
) -> None:
    sizes = batch_sizes(waiting, min_batch, max_batch)
    assert all(min_batch <= s <= max_batch for s in sizes)
    assert sum(sizes) <= waiting
    left = waiting - sum(sizes)
    # What stays could not have made one more batch, or is below min_batch.
    assert left < min_batch or (max_batch < 2 * min_batch and left < max_batch)
    if sizes:
        assert max(sizes) - min(sizes) <= 1 or max_batch < 2 * min_batch


def test_the_maximum_wait_holds_reports_for_bigger_batches_never_below_min_batch(
    tmp_path: Path,
) -> None:
    forwarder = Forwarder(
        str(tmp_path / "s.db"), "http://127.0.0.1:9", "t" * 16, max_batch=500, max_wait=60.0
    )
    try:
        # Without a maximum wait a batch leaves as soon as min_batch wait.
        eager = Forwarder(str(tmp_path / "s.db"), "http://127.0.0.1:9", "t" * 16, max_batch=500)
        assert eager.due(120, 100, 0.0) == [120] and eager.due(99, 100, 1e9) == []
        eager.close()
        # With one, reports wait for a full batch until the oldest has waited max_wait ...
        assert forwarder.due(120, 100, 59.9) == []
        assert forwarder.due(1100, 100, 0.0) == [500, 500]
        # ... then everything leaves in batches of at least min_batch; below it nothing does.
        assert forwarder.due(120, 100, 60.0) == [120]
        assert forwarder.due(1100, 100, 60.0) == [367, 367, 366]
        assert forwarder.due(99, 100, 1e9) == []
        assert forwarder.due(600, 700, 1e9) == []  # max_batch below min_batch
    finally:
        forwarder.close()


def test_a_report_forwarded_again_is_a_duplicate_and_no_new_user(tmp_path: Path) -> None:
    """The collector's side of a device's retry: a second batch carrying a fresh id it already
    stored stores it once, and the batch's size (for the central guarantee) leaves it out."""
    from collector.storage import Storage

    campaign = {
        "name": "s",
        "mechanism": {"mechanism": "grr", "k": 4},
        "domain": ["a", "b", "c", "d"],
        "shuffle": {"min_batch": 3, "central_epsilon": 1.0, "delta": 1e-6},
    }
    ids = [f"{i:032x}" for i in range(1, 6)]
    with Storage(tmp_path / "c.db") as storage:
        storage.create_campaign(campaign)
        first = [(i, "1") for i in ids[:3]]
        result, _, _ = storage.insert_batch("s", "a" * 32, first, size=3)
        assert (result.accepted, result.duplicate) == (3, 0)
        second = [(ids[2], "1"), (ids[3], "2"), (ids[4], "3")]
        result, _, _ = storage.insert_batch("s", "b" * 32, second, size=3)
        assert (result.accepted, result.duplicate) == (2, 1)
        assert storage.batch_sizes("s") == [3, 2]


def test_an_upload_is_checked_at_once_only_when_each_report_would_pass() -> None:
    """The all-at-once check of an upload gives what the report-by-report check gives: every
    report when all are good; otherwise the bad ones, by index (ids with a newline or of
    another length, upper case, non-strings, envelopes the sealing check refuses)."""
    from shuffler.app import _all_good, _checked

    envelope = {"key_id": "0123456789abcdef", "sealed": "QUJD" * 30}
    good = [{"id": f"{i:032x}", "payload": envelope} for i in range(4)]
    expected = [(r["id"], envelope["key_id"], envelope["sealed"]) for r in good]
    assert _all_good(good) == expected and _checked(good) == (expected, [])
    two_ids = f"{1:032x}\n{2:031x}"
    for bad, code in (
        ({"id": two_ids, "payload": envelope}, "invalid_id"),
        ({"id": "A" * 32, "payload": envelope}, "invalid_id"),
        ({"id": 5, "payload": envelope}, "invalid_id"),
        ({"id": f"{9:032x}", "payload": {**envelope, "sealed": "QUJ\nD"}}, "invalid_envelope"),
        ({"id": f"{9:032x}", "payload": {**envelope, "key_id": "x"}}, "invalid_envelope"),
        ({"id": f"{9:032x}"}, "malformed_report"),
    ):
        upload = [*good[:2], bad, *good[2:]]
        assert _all_good(upload) is None
        accepted, rejected = _checked(upload)
        assert accepted == expected and [(r["index"], r["code"]) for r in rejected] == [(2, code)]


def _pending(storage: ShufflerStorage) -> dict[str, int]:
    rows = storage.conn.execute("SELECT campaign, pending FROM pools").fetchall()
    return {str(a): int(b) for a, b in rows}


def test_the_cap_counts_waiting_reports_through_batches_drops_and_expiry(tmp_path: Path) -> None:
    with ShufflerStorage(tmp_path / "s.db") as storage:
        assert storage.accept("c", "old", [_report(i) for i in range(5)], max_pending=20)
        assert storage.accept("c", "cfg", [_report(i) for i in range(5, 20)], max_pending=20)
        with pytest.raises(PendingFull, match=r"has 20 reports waiting .* at most 20"):
            storage.accept("c", "cfg", [_report(99)], max_pending=20)
        assert storage.pending_counts() == {"c": 20} == _pending(storage)  # nothing stored
        assert storage.drop_waiting("c", "old") == 5 and _pending(storage) == {"c": 15}
        assert storage.form_batch("c", "cfg", 10) is not None and _pending(storage) == {"c": 5}
        assert storage.accept("c", "cfg", [_report(i) for i in range(30, 45)], max_pending=20)
        arrivals = {row[0] for row in storage.conn.execute("SELECT arrived FROM waiting")}
        assert arrivals and all(a % ARRIVAL_GRANULARITY == 0 for a in arrivals)  # to the minute
        now = time.time()
        assert storage.expire(3600, now=now) == {}  # nothing is an hour old
        assert storage.expire(3600, now=now + 3600 + ARRIVAL_GRANULARITY) == {"c": 20}
        assert _pending(storage) == {} and storage.expired_counts() == {"c": 20}
        assert storage.accept("c", "cfg", [_report(50)]) == (1, 0)
        assert storage.expire(1, now=now + 2 * ARRIVAL_GRANULARITY + 1) == {"c": 1}
        assert storage.expired_counts() == {"c": 21}  # a counter: it only grows


def test_a_database_from_before_the_cap_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the schema before the maximum age and the cap
        conn.execute(
            "CREATE TABLE waiting (campaign TEXT NOT NULL, config_id TEXT NOT NULL, "
            "fresh_id BLOB NOT NULL, key_id TEXT NOT NULL, sealed TEXT NOT NULL, "
            "PRIMARY KEY (campaign, config_id, fresh_id)) WITHOUT ROWID"
        )
        conn.execute("CREATE TABLE pools (campaign TEXT PRIMARY KEY, since REAL NOT NULL)")
        conn.executemany(
            "INSERT INTO waiting VALUES ('c', 'cfg', ?, 'k', 's')",
            [(bytes([i]),) for i in range(7)],
        )
        conn.execute("INSERT INTO pools VALUES ('c', 1.0)")
    conn.close()
    with ShufflerStorage(db) as storage:
        assert _pending(storage) == {"c": 7}
        assert storage.expire(3600) == {}  # waiting since the upgrade, not since 1970
        assert storage.expire(3600, now=time.time() + 3601) == {"c": 7}
