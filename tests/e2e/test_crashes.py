"""Crashes: the collector SIGKILLed while clients upload, and a client killed mid-flush.

Invariants checked by report id: every recorded report is stored exactly once in the end, none
is lost from an outbox (outbox + stored == recorded), nothing is stored twice, and every report
is acknowledged to its client exactly once.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from pathlib import Path

from collector.process import CollectorProcess
from tests.e2e.conftest import stored_ids
from tests.e2e.workers import read_ids, recording_client, resuming_client, uploading_client

LABELS = [f"opt-{i}" for i in range(8)]
CAMPAIGN = {
    "name": "crashy",
    "mechanism": {"mechanism": "grr", "epsilon": 1.0, "k": len(LABELS)},
    "domain": LABELS,
}
SPAWN = multiprocessing.get_context("spawn")


def outbox_ids(state_dir: Path) -> list[str]:
    path = state_dir / "outbox.sqlite3"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT report_id FROM outbox").fetchall()]
    finally:
        conn.close()


def test_collector_killed_while_clients_upload(tmp_path: Path) -> None:
    collector = CollectorProcess(tmp_path / "collector.db", workers=2, log_dir=tmp_path).start()
    try:
        collector.create_campaign(CAMPAIGN)
        clients = [
            SPAWN.Process(
                target=uploading_client,
                args=(
                    collector.url,
                    "crashy",
                    LABELS,
                    str(tmp_path / f"c{i}"),
                    12,
                    300,
                    i,
                    str(tmp_path / f"c{i}"),
                ),
            )
            for i in range(3)
        ]
        for client in clients:
            client.start()
        # Let uploads get going, then crash the collector (master and workers) mid-stream.
        deadline = time.monotonic() + 60
        while len(stored_ids(collector.db, "crashy")) < 1500 and time.monotonic() < deadline:
            time.sleep(0.02)
        stored_at_crash = len(stored_ids(collector.db, "crashy"))
        collector.kill()
        time.sleep(0.3)
        collector.start()  # same database, same port
        for client in clients:
            client.join(60)
            assert client.exitcode == 0, f"client exited with {client.exitcode}"
    finally:
        collector.stop()

    stored = stored_ids(collector.db, "crashy")
    assert 0 < stored_at_crash < 3 * 12 * 300, "the crash did not happen mid-upload"
    assert len(stored) == len(set(stored)), "a report was stored twice"
    recorded: list[str] = []
    for i in range(3):
        ids = read_ids(tmp_path / f"c{i}.recorded")
        assert len(ids) == 12 * 300
        recorded += ids
        assert outbox_ids(tmp_path / f"c{i}") == []
        assert int((tmp_path / f"c{i}.acknowledged").read_text()) == len(ids)
    assert sorted(stored) == sorted(recorded)


def test_client_killed_mid_flush_resumes_without_loss_or_duplicates(
    collector: CollectorProcess, tmp_path: Path
) -> None:
    campaign = dict(CAMPAIGN, name="client-crash")
    collector.create_campaign(campaign)
    state, out = tmp_path / "device", str(tmp_path / "device")
    total = 3000
    first = SPAWN.Process(
        target=recording_client,
        args=(collector.url, "client-crash", LABELS, str(state), total, out),
    )
    first.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(stored_ids(collector.db, "client-crash")) < 300:
        time.sleep(0.01)
    first.kill()  # SIGKILL, mid-flush
    first.join()
    stored_at_kill = stored_ids(collector.db, "client-crash")
    recorded = read_ids(f"{out}.recorded")
    assert len(recorded) == total
    assert 0 < len(stored_at_kill) < total, "the client was not killed mid-flush"
    # Nothing lost at the kill: whatever is not stored is still in the outbox.
    assert set(recorded) == set(stored_at_kill) | set(outbox_ids(state))

    second = SPAWN.Process(target=resuming_client, args=(collector.url, str(state), out))
    second.start()
    second.join(60)
    assert second.exitcode == 0
    stored = stored_ids(collector.db, "client-crash")
    assert len(stored) == len(set(stored)) == total
    assert set(stored) == set(recorded)
    assert outbox_ids(state) == []
    # The resumed client acknowledged everything left in its outbox (some as duplicates, if
    # the kill fell between the collector's commit and the outbox delete).
    assert int(Path(f"{out}.resumed").read_text()) >= total - len(stored_at_kill)
