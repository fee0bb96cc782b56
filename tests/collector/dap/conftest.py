"""A real DAP pair: a Leader and a Helper collector process (gunicorn, SQLite), provisioned
through ``ldp-collector dap``, and devices uploading with ``client_sdk.dap.upload``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from client_sdk.dap.messages import HpkeConfigList, Report, UploadErrors, UploadRequest
from client_sdk.dap.upload import DapTask, prepare_report, select_hpke_config
from collector.dap.task import TaskSpec, b64encode
from collector.process import CollectorProcess, entry_point

TIME_PRECISION = 3600
AGGREGATOR_TOKEN = "aggregator-token-" + "a" * 16
COLLECTOR_TOKEN = "collector-token-" + "c" * 16


def run(*args: str, command: str = "ldp-collector", module: str = "collector.cli") -> str:
    """Run a CLI as a real process; its stdout (``AssertionError`` with stderr on failure)."""
    done = subprocess.run(
        [*entry_point(command, module), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@dataclass
class DapPair:
    tmp: Path
    leader: CollectorProcess
    helper: CollectorProcess
    spec: TaskSpec
    task_file: Path
    collector_key: Path

    @property
    def leader_dap(self) -> str:
        return f"{self.leader.url}/dap"

    def device_task(self, vdaf: Any = None) -> DapTask:
        """What a device builds: each aggregator's HpkeConfig fetched over HTTP."""
        configs = []
        for name, server in (("leader", self.leader), ("helper", self.helper)):
            answer = requests.get(
                f"{server.url}/dap/hpke_config",
                params={"task_id": self.spec.task_id_text},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            configs.append(select_hpke_config(HpkeConfigList.decode(answer.content), name))
        return DapTask(
            self.spec.task_id,
            self.spec.configuration(),
            vdaf or self.spec.build_vdaf(),
            configs[0],
            configs[1],
        )

    def upload(self, reports: list[Report]) -> UploadErrors:
        answer = requests.post(
            f"{self.leader_dap}/tasks/{self.spec.task_id_text}/reports",
            data=UploadRequest(tuple(reports)).encode(),
            headers={"Content-Type": UploadRequest.MEDIA_TYPE},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return UploadErrors.decode(answer.content)

    def upload_measurements(self, measurements: list[Any]) -> None:
        task = self.device_task()
        reports = [prepare_report(task, m) for m in measurements]
        for start in range(0, len(reports), 100):
            assert self.upload(reports[start : start + 100]).status == ()

    def drive(self) -> dict[str, int]:
        out = run("dap", "drive", "--db", str(self.leader.db))
        return dict(json.loads(out.split(": ", 1)[1]))

    def collect(self, interval: str | None = None) -> subprocess.CompletedProcess[str]:
        unit = int(time.time()) // TIME_PRECISION
        return subprocess.run(
            [
                *entry_point("ldp-analyze", "analysis.cli"),
                "collect",
                "--task",
                str(self.task_file),
                "--leader",
                self.leader_dap,
                "--collector-key",
                str(self.collector_key),
                "--token",
                COLLECTOR_TOKEN,
                "--interval",
                interval or f"{unit - 1},3",
                "--timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )


def start_pair(tmp: Path, vdaf: dict[str, Any], *, min_batch_size: int, dp: str) -> DapPair:
    leader = CollectorProcess(tmp / "leader.db", workers=1, log_dir=tmp).start()
    try:
        helper = CollectorProcess(tmp / "helper.db", workers=1, log_dir=tmp).start()
    except BaseException:
        leader.stop()
        raise
    task_file = tmp / "task.json"
    spec_doc = {
        "task_id": b64encode(os.urandom(32)),
        "task_info": "tests",
        "leader": f"{leader.url}/dap/",
        "helper": f"{helper.url}/dap/",
        "vdaf": vdaf,
        "min_batch_size": min_batch_size,
        "time_precision": TIME_PRECISION,
        "dp": dp,
    }
    task_file.write_text(json.dumps(spec_doc))
    spec = TaskSpec.load(str(task_file))
    collector_config = run("dap", "keygen", "--out", str(tmp / "collector-key.json")).strip()
    verify_key = b64encode(os.urandom(spec.build_vdaf().VERIFY_KEY_SIZE))
    for role, server in (("leader", leader), ("helper", helper)):
        run("dap", "keygen", "--out", str(tmp / f"{role}-key.json"))
        run(
            "dap", "task", "add", "--db", server.db, "--task", str(task_file), "--role", role,
            # "--flag=value": a base64url value may start with "-"
            f"--verify-key={verify_key}", "--hpke-key", str(tmp / f"{role}-key.json"),
            f"--collector-hpke-config={collector_config}",
            "--aggregator-token", AGGREGATOR_TOKEN,
            "--collector-token", COLLECTOR_TOKEN if role == "leader" else "",
        )  # fmt: skip
    return DapPair(tmp, leader, helper, spec, task_file, tmp / "collector-key.json")


@pytest.fixture
def dap_pair(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DapPair]:
    """``request.param``: ``(vdaf, min_batch_size, dp)``."""
    vdaf, min_batch_size, dp = request.param
    pair = start_pair(tmp_path, vdaf, min_batch_size=min_batch_size, dp=dp)
    try:
        yield pair
    finally:
        pair.leader.stop()
        pair.helper.stop()
