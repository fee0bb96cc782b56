"""The shuffler's ``/readyz`` on a full disk (a real shuffler, its database on a 16 MiB tmpfs
filled to its last byte): 503 ``database-unavailable``, and 200 again once space is back.
Before, it only read the database and answered 200."""

from __future__ import annotations

import time
from pathlib import Path

import requests

from collector.process import CollectorProcess
from shuffler.process import ShufflerProcess
from tests.disk import fill, small_disk


def test_shuffler_readyz_is_503_on_a_full_disk(tmp_path: Path) -> None:
    collector = CollectorProcess(tmp_path / "collector.db", workers=1).start()
    try:
        with small_disk(tmp_path / "disk") as disk:
            shuffler = ShufflerProcess(
                disk / "shuffler.db", collector.url, workers=1, log_dir=tmp_path
            )
            shuffler.start()
            try:
                ready = f"{shuffler.url}/readyz"
                deadline = time.monotonic() + 30  # until serve's watch recorded its forwarder
                while requests.get(ready, timeout=10).status_code != 200:
                    assert time.monotonic() < deadline, "the shuffler never became ready"
                    time.sleep(0.2)

                filler = fill(disk)
                answer = requests.get(ready, timeout=10)
                assert answer.status_code == 503, answer.text
                assert answer.headers["Content-Type"] == "application/problem+json"
                assert answer.json()["type"].endswith(":database-unavailable")

                filler.unlink()
                assert requests.get(ready, timeout=10).status_code == 200
            finally:
                shuffler.stop()
    finally:
        collector.stop()
