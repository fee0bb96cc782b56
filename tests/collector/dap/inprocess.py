"""A Leader and a Helper in this process: the aggregators' real protocol code
(``collector.dap.aggregator``) over two SQLite databases, the HTTP hop replaced by a direct
call, and a clock the test sets (``now``). For what real processes would make too slow (many
collections, clock travel); ``conftest.DapPair`` is the real-process pair."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from client_sdk.dap.hpke import generate_key_pair
from client_sdk.dap.messages import (
    CollectionJobReq,
    CollectionJobResp,
    HpkeConfig,
    Interval,
    Query,
    Report,
    UploadErrors,
    UploadRequest,
)
from client_sdk.dap.upload import DapTask, prepare_report
from client_sdk.randomness import RandomSource
from collector.dap import aggregator
from collector.dap.aggregator import DapProblem
from collector.dap.task import AggregatorTask, TaskSpec, b64decode, b64encode
from collector.storage import Storage

TIME_PRECISION = 3600
AGGREGATOR_TOKEN = "aggregator-token-" + "a" * 16


class InProcessPair:
    """One task on an in-process Leader and Helper. ``now`` is both aggregators' clock
    (seconds); ``leader_rng`` / ``helper_rng`` their noise sources (None: the OS CSPRNG)."""

    def __init__(
        self,
        tmp: Path,
        vdaf: dict[str, Any],
        *,
        min_batch_size: int = 1,
        dp: str = "none",
        now: float = 1_800_000_000.0,
        leader_rng: RandomSource | None = None,
        helper_rng: RandomSource | None = None,
        **extra: Any,
    ) -> None:
        self.now = now
        self.helper_offset = 0.0  # the Helper's clock minus the Leader's
        self.leader_rng, self.helper_rng = leader_rng, helper_rng
        self.spec = TaskSpec.from_json(
            {
                "task_id": b64encode(os.urandom(32)),
                "task_info": "in-process tests",
                "leader": "http://leader.invalid/dap/",
                "helper": "http://helper.invalid/dap/",
                "vdaf": vdaf,
                "min_batch_size": min_batch_size,
                "time_precision": TIME_PRECISION,
                "dp": dp,
                **extra,
            }
        )
        self.collector_keys = generate_key_pair()
        collector_config = HpkeConfig(1, 0x20, 1, 1, self.collector_keys.public_key)
        verify_key = os.urandom(self.spec.build_vdaf().VERIFY_KEY_SIZE)
        self.tasks: dict[str, AggregatorTask] = {}
        self.storages: dict[str, Storage] = {}
        for role in ("leader", "helper"):
            keys = generate_key_pair()
            self.tasks[role] = AggregatorTask(
                spec=self.spec,
                role=role,
                verify_key=verify_key,
                hpke_config=HpkeConfig(1, 0x20, 1, 1, keys.public_key),
                hpke_private_key=keys.private_key,
                collector_hpke_config=collector_config,
                aggregator_token=AGGREGATOR_TOKEN,
                collector_token="collector-token-" + "c" * 16 if role == "leader" else "",
            )
            storage = Storage(tmp / f"{role}-{self.spec.task_id_text[:8]}.db")
            storage.migrate()
            aggregator.provision(storage.db.conn, self.tasks[role])
            self.storages[role] = storage

    def close(self) -> None:
        for storage in self.storages.values():
            storage.close()

    def conn(self, role: str) -> Any:
        return self.storages[role].db.conn

    # -- the HTTP hop Leader -> Helper, as a direct call

    def send(
        self, method: str, url: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        helper = self.tasks["helper"]
        assert headers["Authorization"] == f"Bearer {AGGREGATOR_TOKEN}"
        try:
            if "/aggregation_jobs/" in url and method == "PUT":
                job = b64decode(url.rsplit("/", 1)[1], "job id", 16)
                conn = self.conn("helper")
                return 200, aggregator.helper_init(
                    conn, helper, job, body, now=self.now + self.helper_offset
                )
            if url.endswith("/aggregate_shares") and method == "POST":
                conn = self.conn("helper")
                return 200, aggregator.aggregate_share(
                    conn, helper, body, self.helper_rng, now=self.now + self.helper_offset
                )
        except DapProblem as problem:
            return problem.status, f"{problem.name}: {problem.detail}".encode()
        raise AssertionError(f"no such Helper route: {method} {url}")

    # -- the parties

    def device_task(self, vdaf: Any = None) -> DapTask:
        return DapTask(
            self.spec.task_id,
            self.spec.configuration(),
            vdaf or self.spec.build_vdaf(),
            self.tasks["leader"].hpke_config,
            self.tasks["helper"].hpke_config,
        )

    def reports(self, measurements: list[Any], at: float | None = None) -> list[Report]:
        """Reports made by devices whose clock reads ``at`` (default: ``now``)."""
        task = self.device_task()
        when = self.now if at is None else at
        return [prepare_report(task, m, now=when) for m in measurements]

    def upload(self, reports: list[Report]) -> UploadErrors:
        body = UploadRequest(tuple(reports)).encode()
        return aggregator.upload(self.conn("leader"), self.tasks["leader"], body, now=self.now)

    def drive(self) -> dict[str, int]:
        return aggregator.drive(self.conn("leader"), self.tasks["leader"], self.send, now=self.now)

    def collect(self, interval: Interval) -> dict[str, Any]:
        """A collection job for ``interval`` run to its end; ``analysis.dap_collect``'s
        decoded result (``DapProblem`` if the Leader refuses)."""
        from analysis.dap_collect import decode_result

        req = CollectionJobReq(Query.time_interval(interval))
        job = os.urandom(16)
        leader = self.tasks["leader"]
        aggregator.create_collection(self.conn("leader"), leader, job, req.encode())
        body = aggregator.collection_result(
            self.conn("leader"), leader, job, self.send, self.leader_rng
        )
        assert body is not None, "reports of the interval still wait for the driver"
        resp = CollectionJobResp.decode(body)
        return decode_result(self.spec, resp, req, self.collector_keys.private_key)

    def unit(self, at: float | None = None) -> int:
        """The time unit of ``at`` (default: ``now``)."""
        return int(self.now if at is None else at) // TIME_PRECISION
