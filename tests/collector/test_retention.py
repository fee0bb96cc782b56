"""The retention cleanup inside the collector (issue 27, item 2): one worker at a time cleans,
at most once per interval, a crashed worker's lease expires (a clock the test controls), and a
real gunicorn collector cleans on its own, across SIGHUP and a stop/start."""

from __future__ import annotations

import datetime
import os
import re
import secrets
import signal
import time
from pathlib import Path

import pytest
import requests

from collector.cli import main as collector_cli
from collector.process import CollectorProcess
from collector.retention import LEASE, LEASE_SECONDS, RetentionWorker, clean_if_due
from collector.storage import Storage

CAMPAIGN = {
    "name": "window",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": 3},
    "domain": ["light", "dark", "system"],
    "min_batch_size": 1,
    "retention_days": 2,
}
TODAY = datetime.date(2027, 1, 10)
OLD_DAY = "2027-01-07"  # past the two retained days (2027-01-09 and 2027-01-10)
KEPT_DAY = "2027-01-10"


def _store(db: Path, day: str, count: int) -> None:
    with Storage(str(db)) as storage:
        rows = [(secrets.token_hex(16), "0") for _ in range(count)]
        storage.insert_reports("window", rows, day=day)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    with Storage(str(path)) as storage:
        storage.migrate()
        storage.create_campaign(CAMPAIGN)
    _store(path, OLD_DAY, 4)
    _store(path, KEPT_DAY, 3)
    return path


def test_one_worker_cleans_once_per_interval(db: Path) -> None:
    interval = 100.0
    with Storage(str(db)) as first, Storage(str(db)) as second:
        assert clean_if_due(first, "a", now=1000.0, interval=interval, today=TODAY) == {"window": 4}
        # The other worker, at the same time and until the interval has passed: not due.
        for now in (1000.0, 1050.0, 1099.9):
            assert clean_if_due(second, "b", now=now, interval=interval, today=TODAY) is None
        _store(db, OLD_DAY, 2)
        assert clean_if_due(second, "b", now=1100.0, interval=interval, today=TODAY) == {
            "window": 2
        }
        assert clean_if_due(first, "a", now=1100.0, interval=interval, today=TODAY) is None
        assert second.report_days("window") == [(KEPT_DAY, 3)]


def test_a_crashed_workers_lease_expires(db: Path) -> None:
    with Storage(str(db)) as storage:
        # Worker "dead" took the lease at t=1000 and died before it finished.
        assert storage.take_lease(LEASE, "dead", now=1000.0, ttl=LEASE_SECONDS)
        later = 1000.0 + LEASE_SECONDS
        assert clean_if_due(storage, "b", now=later - 1, interval=10.0, today=TODAY) is None
        assert storage.count_reports("window") == 7  # nobody cleaned while it was held
        assert clean_if_due(storage, "b", now=later, interval=10.0, today=TODAY) == {"window": 4}
        # The dead worker's late finish does not release the lease it lost.
        assert not storage.finish_lease(LEASE, "dead", next_due=0.0)
        assert clean_if_due(storage, "c", now=later + 1, interval=10.0, today=TODAY) is None


def test_a_failed_cleanup_releases_the_lease(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Storage(str(db)) as storage:

        def broken(today: datetime.date) -> dict[str, int]:
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(storage, "apply_retention", broken)
        with pytest.raises(RuntimeError):
            clean_if_due(storage, "a", now=1000.0, interval=10.0, today=TODAY)
        monkeypatch.undo()
        # Released, due again one interval later (not retried in a tight loop).
        assert clean_if_due(storage, "b", now=1009.0, interval=10.0, today=TODAY) is None
        assert clean_if_due(storage, "b", now=1010.0, interval=10.0, today=TODAY) == {"window": 4}


def test_worker_thread_uses_its_clock_and_interval(db: Path) -> None:
    now = [5000.0]
    config = {
        "DB": str(db),
        "BUSY_TIMEOUT": 5.0,
        "SYNCHRONOUS": "FULL",
        "TODAY": TODAY.isoformat(),
        "RETENTION_INTERVAL": 60.0,
    }
    workers = [RetentionWorker(config, clock=lambda: now[0]) for _ in range(3)]
    results = [worker.run_once() for worker in workers]
    assert results == [{"window": 4}, None, None]
    now[0] += 60.0
    assert workers[2].run_once() == {"window": 0}
    off = RetentionWorker({**config, "RETENTION_INTERVAL": 0.0}).start()
    assert off.thread is None  # 0 turns the cleanup off


def test_serve_refuses_a_negative_interval(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "--db", str(db), "--port", "0", "--retention-interval", "-1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LDP_ADMIN_TOKEN", secrets.token_urlsafe(32))
        assert collector_cli(argv) == 2
    assert "--retention-interval must be >= 0 seconds; got -1.0" in capsys.readouterr().err


def _deleted_total(url: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=30).text
    match = re.search(
        r'^ldp_collector_retention_deleted_reports_total\{campaign="window"\} (\S+)$', text, re.M
    )
    return float(match.group(1)) if match else 0.0


def _wait_for(url: str, total: float, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _deleted_total(url) == total:
            return
        time.sleep(0.2)
    raise AssertionError(f"deleted {_deleted_total(url)} reports, not {total}, in {timeout} s")


def _worker_pids(master: int) -> set[int]:
    children = Path(f"/proc/{master}/task/{master}/children")
    return {int(pid) for pid in children.read_text().split()}


def test_a_real_collector_cleans_on_its_own_across_restarts(db: Path, tmp_path: Path) -> None:
    process = CollectorProcess(
        db, workers=2, log_dir=tmp_path, create=False, extra_args=["--retention-interval", "0.5"]
    )
    process.env["LDP_TODAY"] = TODAY.isoformat()
    with process:
        _wait_for(process.url, 4.0)
        _store(db, OLD_DAY, 5)  # arrives while it serves: the next round deletes it
        _wait_for(process.url, 9.0)

        assert process.process is not None
        master = process.process.pid
        before = _worker_pids(master)
        os.kill(master, signal.SIGHUP)  # gunicorn reloads: new workers, the same master
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            _worker_pids(master) & before or len(_worker_pids(master)) != 2
        ):
            time.sleep(0.1)
        assert not _worker_pids(master) & before and len(_worker_pids(master)) == 2
        _store(db, OLD_DAY, 6)
        _wait_for(process.url, 15.0)

        process.restart()
        _store(db, OLD_DAY, 1)
        _wait_for(process.url, 16.0)
        with Storage(str(db), create=False) as storage:
            assert storage.report_days("window") == [(KEPT_DAY, 3)]
    log = "".join(path.read_text() for path in tmp_path.glob("collector-*.err"))
    assert "retention cleanup failed" not in log and "Traceback" not in log


def test_no_cleanup_when_the_interval_is_zero(db: Path, tmp_path: Path) -> None:
    process = CollectorProcess(
        db, workers=1, log_dir=tmp_path, create=False, extra_args=["--retention-interval", "0"]
    )
    process.env["LDP_TODAY"] = TODAY.isoformat()
    with process:
        time.sleep(1.0)
        assert _deleted_total(process.url) == 0.0
    with Storage(str(db), create=False) as storage:
        assert storage.count_reports("window") == 7
