"""A real DAP pair: a Leader and a Helper collector process (gunicorn, SQLite), provisioned
through ``ldp-collector dap``, and devices uploading with ``client_sdk.dap.upload``."""

from __future__ import annotations

import contextlib
import importlib
import io
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

    def drive(self, *, process: bool = False) -> dict[str, int]:
        """``ldp-collector dap drive`` for this task: in its own process with ``process=True``,
        else its ``main`` in this process (the same code against the real servers, without
        a second or more of imports per call)."""
        args = ["dap", "drive", "--db", str(self.leader.db), f"--task-id={self.spec.task_id_text}"]
        out = run(*args) if process else _in_process("collector.cli", args).stdout
        return dict(json.loads(out.split(": ", 1)[1]))

    def collect(
        self,
        interval: str | None = None,
        *,
        process: bool = False,
        campaign: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``ldp-analyze collect`` (the Collector): its own process with ``process=True``, else
        its ``main`` in this process (about 3 s of CPU for the imports saved per call);
        ``campaign``: the campaign document's file (``--campaign``)."""
        unit = int(time.time()) // TIME_PRECISION
        args = [
            "collect", "--task", str(self.task_file), "--leader", self.leader_dap,
            "--collector-key", str(self.collector_key), "--token", COLLECTOR_TOKEN,
            "--interval", interval or f"{unit - 1},3", "--timeout", "60",
        ]  # fmt: skip
        if campaign is not None:
            args += ["--campaign", str(campaign)]
        if not process:
            return _in_process("analysis.cli", args)
        return subprocess.run(
            [*entry_point("ldp-analyze", "analysis.cli"), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )


def _in_process(module: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """A CLI's ``main(args)`` run here, its output captured like a process's."""
    main = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@dataclass
class DapServers:
    """A running Leader and Helper with the HPKE keys every task of them uses."""

    tmp: Path
    leader: CollectorProcess
    helper: CollectorProcess
    collector_config: str  # the Collector's HpkeConfig, base64url

    def stop(self) -> None:
        self.leader.stop()
        self.helper.stop()


def start_servers(tmp: Path, *, drive_interval: float = 0, leader_workers: int = 1) -> DapServers:
    """A Leader and a Helper (gunicorn; one Helper worker) and the three HPKE key files. The
    Leader's driver inside ``serve`` is off unless ``drive_interval`` is given: most tests
    drive with ``ldp-collector dap drive`` and count what each run did (``test_driver.py``
    runs the one in ``serve``)."""
    driver = ["--dap-drive-interval", str(drive_interval)]
    leader = CollectorProcess(
        tmp / "leader.db", workers=leader_workers, log_dir=tmp, extra_args=driver
    ).start()
    try:
        helper = CollectorProcess(
            tmp / "helper.db", workers=1, log_dir=tmp, extra_args=driver
        ).start()
    except BaseException:
        leader.stop()
        raise
    collector_config = run("dap", "keygen", "--out", str(tmp / "collector-key.json")).strip()
    for role in ("leader", "helper"):
        run("dap", "keygen", "--out", str(tmp / f"{role}-key.json"))
    return DapServers(tmp, leader, helper, collector_config)


def add_task(
    servers: DapServers,
    vdaf: dict[str, Any],
    *,
    min_batch_size: int,
    dp: str,
    helper_url: str | None = None,
    **extra: Any,
) -> DapPair:
    """Provision a fresh task (a new random id) on both servers through ``ldp-collector dap
    task add`` (in-process: the servers read it from their databases). ``helper_url`` is the
    Helper's endpoint in the task (a proxy in front of it, say); ``extra`` more task fields."""
    from collector.cli import main as collector_main

    tmp = servers.tmp
    spec_doc = {
        "task_id": b64encode(os.urandom(32)),
        "task_info": "tests",
        "leader": f"{servers.leader.url}/dap/",
        "helper": helper_url or f"{servers.helper.url}/dap/",
        "vdaf": vdaf,
        "min_batch_size": min_batch_size,
        "time_precision": TIME_PRECISION,
        "dp": dp,
        **extra,
    }
    task_file = tmp / f"task-{spec_doc['task_id']}.json"
    task_file.write_text(json.dumps(spec_doc))
    spec = TaskSpec.load(str(task_file))
    verify_key = b64encode(os.urandom(spec.build_vdaf().VERIFY_KEY_SIZE))
    for role, server in (("leader", servers.leader), ("helper", servers.helper)):
        status = collector_main(
            [
                "dap", "task", "add", "--db", server.db, "--task", str(task_file),
                "--role", role,
                # "--flag=value": a base64url value may start with "-"
                f"--verify-key={verify_key}", "--hpke-key", str(tmp / f"{role}-key.json"),
                f"--collector-hpke-config={servers.collector_config}",
                "--aggregator-token", AGGREGATOR_TOKEN,
                "--collector-token", COLLECTOR_TOKEN if role == "leader" else "",
            ]
        )  # fmt: skip
        assert status == 0
    return DapPair(tmp, servers.leader, servers.helper, spec, task_file, tmp / "collector-key.json")


def start_pair(tmp: Path, vdaf: dict[str, Any], *, min_batch_size: int, dp: str) -> DapPair:
    """Servers of its own and one task (the caller stops ``leader`` and ``helper``)."""
    return add_task(start_servers(tmp), vdaf, min_batch_size=min_batch_size, dp=dp)


@pytest.fixture(scope="session")
def dap_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DapServers]:
    """One Leader/Helper pair per test session (per xdist worker): starting two gunicorn
    servers costs seconds, a task costs milliseconds. Tests that kill or restart a server
    use :func:`own_dap_pair` instead."""
    servers = start_servers(tmp_path_factory.mktemp("dap-servers"))
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def dap_pair(dap_servers: DapServers, request: pytest.FixtureRequest) -> DapPair:
    """A fresh task on the shared pair. ``request.param``: ``(vdaf, min_batch_size, dp)``."""
    for server in (dap_servers.leader, dap_servers.helper):
        if server.process is None or server.process.poll() is not None:
            server.start()  # a test killed a shared server: bring it back (same port)
    vdaf, min_batch_size, dp = request.param
    return add_task(dap_servers, vdaf, min_batch_size=min_batch_size, dp=dp)


@pytest.fixture
def own_dap_pair(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DapPair]:
    """A task on servers of its own, for tests that kill or restart them.
    ``request.param``: ``(vdaf, min_batch_size, dp)``."""
    vdaf, min_batch_size, dp = request.param
    pair = start_pair(tmp_path, vdaf, min_batch_size=min_batch_size, dp=dp)
    try:
        yield pair
    finally:
        pair.leader.stop()
        pair.helper.stop()
