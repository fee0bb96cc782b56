"""Aggregation on a LocalCluster (2 worker processes) when a worker is killed mid-job."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from analysis import distributed, sources
from client_sdk.mechanisms import Mechanism, Reports
from tests.scaleout.shards import build_shards


@dataclasses.dataclass(frozen=True)
class SlowFragment:
    """A real fragment read slowly, so that a worker can be killed while the job runs."""

    inner: Any
    seconds: float

    def read(self, mechanism: Mechanism) -> tuple[Any, Reports, Any]:
        time.sleep(self.seconds)
        return self.inner.read(mechanism)


def test_a_worker_killed_mid_job_changes_nothing(tmp_path: Path, dask_client: Any) -> None:
    dbs, parquets, _ = build_shards(tmp_path, "olh", n=2400)
    work = sources.plan("c", dbs, parquets, partitions=16)
    expected = sources.aggregate_local(work)
    slow = dataclasses.replace(
        work, tasks=tuple(tuple(SlowFragment(f, 0.25) for f in task) for task in work.tasks)
    )
    pids = dask_client.run(os.getpid)
    result: dict[str, Any] = {}

    def kill_when_half_done() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            processing = dask_client.processing()
            done = sum(len(v) for v in dask_client.has_what().values())
            if done >= 2 and any(processing.values()):
                victim = next(address for address, tasks in processing.items() if tasks)
                result["victim"] = pids[victim]
                os.kill(pids[victim], signal.SIGKILL)
                return
            time.sleep(0.05)

    import threading

    killer = threading.Thread(target=kill_when_half_done)
    killer.start()
    merged = distributed.aggregate_distributed(dask_client, slow)
    killer.join()
    assert "victim" in result, "the job ended before a worker could be killed"
    assert merged.statistic == expected.statistic
    assert merged.duplicates == expected.duplicates
    assert result["victim"] not in dask_client.run(os.getpid).values()


def test_dask_addresses() -> None:
    assert distributed.parse_address("local") == ("local", None)
    assert distributed.parse_address("local:3") == ("local", 3)
    assert distributed.parse_address("tcp://10.0.0.5:8786") == ("remote", None)
    for bad in ("local:0", "dask", "tcp://host", "http://h:1"):
        with pytest.raises(ValueError, match="--dask"):
            distributed.parse_address(bad)
