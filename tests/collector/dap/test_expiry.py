"""Report times: too far ahead (beyond the tolerated clock skew) or too old (beyond the task's
report expiry) refused on both aggregators and counted by reason; expired reports dropped with
their shares; anti-replay ids forgotten only once a replay would be refused as expired anyway.
In-process aggregators with a clock the test sets (``InProcessPair.now``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from client_sdk.dap.messages import ReportError
from collector.dap import aggregator
from collector.dap.task import TaskSpec
from tests.collector.dap.inprocess import TIME_PRECISION, InProcessPair

EXPIRY = 2 * 86400
COUNT = {"type": "count"}


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[InProcessPair]:
    pair = InProcessPair(tmp_path, COUNT, report_expiry=EXPIRY)
    try:
        yield pair
    finally:
        pair.close()


def counters(pair: InProcessPair, role: str) -> dict[str, int]:
    rows = pair.conn(role).execute(
        "SELECT reason, value FROM dap_counters WHERE task_id = ?", [pair.spec.task_id_text]
    )
    return dict(rows.fetchall())


def held_ids(pair: InProcessPair, role: str) -> int:
    return int(
        pair.conn(role)
        .execute("SELECT count(*) FROM dap_reports WHERE task_id = ?", [pair.spec.task_id_text])
        .fetchone()[0]
    )


def test_upload_refuses_reports_too_early_and_too_old(pair: InProcessPair) -> None:
    now, skew = pair.now, pair.spec.skew
    assert skew == TIME_PRECISION  # the default: one time unit
    early = pair.reports([True], at=now + skew + TIME_PRECISION)  # its unit starts past skew
    ahead = pair.reports([True], at=now + skew)  # within the skew
    old = pair.reports([True], at=now - EXPIRY - TIME_PRECISION)  # its unit ended > EXPIRY ago
    recent = pair.reports([True], at=now - EXPIRY + TIME_PRECISION)
    errors = pair.upload(early + ahead + old + recent)
    assert [(s.id, s.error) for s in errors.status] == [
        (early[0].report_metadata.report_id, ReportError.REPORT_TOO_EARLY),
        (old[0].report_metadata.report_id, ReportError.REPORT_DROPPED),
    ]
    assert counters(pair, "leader") == {"report_too_early": 1, "report_expired": 1}
    assert pair.drive()["aggregated"] == 2
    assert held_ids(pair, "leader") == held_ids(pair, "helper") == 2


def test_expiry_boundaries() -> None:
    task = TaskSpec.from_json(
        {
            "task_id": "A" * 43,
            "leader": "http://l/",
            "helper": "http://h/",
            "vdaf": COUNT,
            "min_batch_size": 1,
            "time_precision": 100,
            "report_expiry": 1000,
            "clock_skew": 50,
        }
    )
    # Unit 10 covers [1000, 1100): expired once 1100 + 1000 <= now, forgettable 50 s later.
    assert not task.expired(10, 2099) and task.expired(10, 2100)
    assert not task.forgettable(10, 2149) and task.forgettable(10, 2150)
    # Too early once its start (1000) lies beyond now + 50.
    assert task.too_early(10, 949) and not task.too_early(10, 950)


def test_helper_refuses_what_its_own_clock_finds_expired(pair: InProcessPair) -> None:
    assert pair.upload(pair.reports([True, False])).status == ()
    pair.helper_offset = EXPIRY + 2 * TIME_PRECISION  # the Helper's clock runs ahead
    assert pair.drive() == {"aggregated": 0, "rejected": 2, "jobs": 1}
    assert counters(pair, "helper") == {"report_expired": 2}
    assert counters(pair, "leader") == {"report_expired": 2}
    pair.helper_offset = -(pair.spec.skew + 2 * TIME_PRECISION)  # now it lags: too early
    assert pair.upload(pair.reports([True])).status == ()
    assert pair.drive() == {"aggregated": 0, "rejected": 1, "jobs": 1}
    assert counters(pair, "helper")["report_too_early"] == 1


def test_pending_reports_expire_with_their_shares(pair: InProcessPair) -> None:
    assert pair.upload(pair.reports([True] * 3)).status == ()
    pair.now += EXPIRY + 2 * TIME_PRECISION  # the driver did not run for two days
    assert pair.drive() == {"aggregated": 0, "rejected": 0, "jobs": 0}
    assert held_ids(pair, "leader") == 0  # shares and ids gone: nothing of them stays
    assert counters(pair, "leader") == {"report_expired": 3}


def test_anti_replay_ids_are_forgotten_only_when_a_replay_is_refused_anyway(
    pair: InProcessPair,
) -> None:
    start = pair.now
    reports = pair.reports([True] * 4)
    assert pair.upload(reports).status == ()
    assert pair.drive()["aggregated"] == 4
    # (No collection: that would refuse the replay as batch_collected before any id check.)
    # Walk the clock past expiry + skew in steps of half a unit; at every step the Leader
    # and the Helper apply their retention, and a replay of the reports is refused (as a
    # replay while the ids are held, as expired once they may be gone).
    seen = set()
    step = TIME_PRECISION // 2
    for pair.now in range(int(start), int(start) + EXPIRY + 4 * TIME_PRECISION, step):
        pair.drive()
        aggregator.forget_expired(pair.conn("helper"), pair.tasks["helper"], now=pair.now)
        errors = {s.error for s in pair.upload(reports[:1]).status}
        assert errors in ({ReportError.REPORT_REPLAYED}, {ReportError.REPORT_DROPPED}), errors
        seen |= errors
        # A clock stepped back by up to the tolerated skew still refuses it.
        saved = pair.now
        pair.now = saved - pair.spec.skew
        assert pair.upload(reports[:1]).status[0].error in (
            ReportError.REPORT_REPLAYED,
            ReportError.REPORT_DROPPED,
        )
        pair.now = saved
    assert seen == {ReportError.REPORT_REPLAYED, ReportError.REPORT_DROPPED}
    assert held_ids(pair, "leader") == held_ids(pair, "helper") == 0  # forgotten at the end
