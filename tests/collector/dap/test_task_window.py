"""A task's validity window (``task_start`` / ``task_end``, DAP-18's ``task_interval``): a report
outside it is refused by the Leader at upload (``report_dropped``, DAP-18's answer there) and
by the Helper in an aggregation job (``task_not_started`` / ``task_expired``), counted by cause
on both. In-process aggregators with a clock the test sets; the real processes are in
``test_interop.py`` (a window given through the interop ``add_task``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client_sdk.dap.messages import ReportError
from collector.dap.task import TaskSpec
from tests.collector.dap.inprocess import TIME_PRECISION, InProcessPair

NOW = 1_800_000_000.0
START = (int(NOW) // TIME_PRECISION - 5) * TIME_PRECISION
END = START + 3 * TIME_PRECISION  # units START/3600 .. +2 are inside


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[InProcessPair]:
    pair = InProcessPair(tmp_path, {"type": "count"}, now=NOW, task_start=START, task_end=END)
    try:
        yield pair
    finally:
        pair.close()


def counters(pair: InProcessPair, role: str) -> dict[str, int]:
    rows = pair.conn(role).execute(
        "SELECT reason, value FROM dap_counters WHERE task_id = ?", [pair.spec.task_id_text]
    )
    return dict(rows.fetchall())


def test_upload_drops_reports_outside_the_window(pair: InProcessPair) -> None:
    before = pair.reports([True], at=START - 1)  # its unit starts before task_start
    first = pair.reports([True], at=START)
    last = pair.reports([True, False], at=END - 1)
    after = pair.reports([True], at=END)  # at task_end: the window is half-open
    errors = pair.upload(before + first + last + after)
    assert [(s.id, s.error) for s in errors.status] == [
        (before[0].report_metadata.report_id, ReportError.REPORT_DROPPED),
        (after[0].report_metadata.report_id, ReportError.REPORT_DROPPED),
    ]
    assert counters(pair, "leader") == {"task_not_started": 1, "task_expired": 1}
    assert pair.drive() == {"aggregated": 3, "rejected": 0, "jobs": 1}


def test_the_helper_rejects_reports_outside_the_window(pair: InProcessPair) -> None:
    # Reports the Leader would have dropped, stored as if uploaded (a Leader without the window,
    # say): the Helper refuses them itself.
    reports = pair.reports([True], at=START - 1) + pair.reports([True], at=END)
    reports += pair.reports([True, True], at=START + 1)
    conn = pair.conn("leader")
    with conn:
        conn.executemany(
            "INSERT INTO dap_reports (task_id, report_id, time, report, state) "
            "VALUES (?, ?, ?, ?, 'start')",
            [
                (pair.spec.task_id_text, r.report_metadata.report_id, r.report_metadata.time,
                 r.encode())
                for r in reports
            ],
        )  # fmt: skip
    assert pair.drive() == {"aggregated": 2, "rejected": 2, "jobs": 1}
    expected = {"task_not_started": 1, "task_expired": 1}
    assert counters(pair, "helper") == expected
    assert counters(pair, "leader") == expected  # the Helper's reasons


def _spec(**window: Any) -> TaskSpec:
    return TaskSpec.from_json(
        {
            "task_id": "A" * 43,
            "leader": "http://l/",
            "helper": "http://h/",
            "vdaf": {"type": "count"},
            "min_batch_size": 1,
            "time_precision": 100,
            **window,
        }
    )


def test_window_fields_are_checked_and_optional() -> None:
    spec = _spec(task_start=1000, task_end=1300)
    assert [spec.window_error(unit) for unit in (9, 10, 12, 13)] == [
        ReportError.TASK_NOT_STARTED,
        None,
        None,
        ReportError.TASK_EXPIRED,
    ]
    assert _spec(task_end=1000).window_error(0) is None
    assert _spec(task_start=1000).window_error(10**9) is None
    # A task without a window is stored as before the fields existed (re-provisioning it
    # finds the same configuration).
    assert "task_start" not in _spec().to_json() and "task_end" not in _spec().to_json()
    assert _spec(task_start=5).to_json()["task_start"] == 5
    for window, message in (
        ({"task_start": -1}, "task task_start must be a non-negative integer (POSIX seconds); "
         "got -1"),
        ({"task_end": "soon"}, "task task_end must be a non-negative integer (POSIX seconds); "
         "got 'soon'"),
        ({"task_end": True}, "task task_end must be a non-negative integer"),
        ({"task_start": 10, "task_end": 10}, "task task_end must be after task_start (10); got 10"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            _spec(**window)
