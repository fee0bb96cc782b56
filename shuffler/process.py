"""A real ``ldp-shuffler serve`` subprocess for the demo, tests and benchmarks
(``collector.process.ServerProcess``: announces its URL, answers ``/healthz``, SIGKILL of the
whole process group, gunicorn and forwarder together)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from collector.process import ServerProcess, entry_point

__all__ = ["ShufflerProcess"]


class ShufflerProcess(ServerProcess):
    """``ldp-shuffler serve --db DB --collector URL`` on 127.0.0.1 with ``LDP_SHUFFLER_TOKEN``
    (``extra_args``: more ``serve`` options)."""

    name = "shuffler"
    ready_prefix = "ldp-shuffler: serving"

    def __init__(
        self,
        db: str | os.PathLike[str],
        collector: str,
        *,
        token: str | None = None,
        workers: int = 2,
        port: int = 0,
        interval: float = 0.2,
        max_wait: float | None = None,
        max_batch: int | None = None,
        restart_delay: float | None = None,
        min_batch_floor: int | None = None,
        credentials_key: str | os.PathLike[str] | None = None,
        quota: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.db = os.fspath(db)
        self.extra_args = list(extra_args)
        self.collector = collector
        self.token = token or secrets.token_urlsafe(32)
        self.workers = workers
        self.interval = interval
        self.max_wait = max_wait
        self.max_batch = max_batch
        self.restart_delay = restart_delay
        self.min_batch_floor = min_batch_floor
        self.credentials_key = credentials_key
        self.quota = quota
        super().__init__(
            log_dir=log_dir if log_dir is not None else Path(self.db).parent,
            port=port,
            env={"LDP_SHUFFLER_TOKEN": self.token},
        )

    def arguments(self) -> list[str]:
        extra = [] if self.max_wait is None else ["--max-wait", str(self.max_wait)]
        if self.max_batch is not None:
            extra += ["--max-batch", str(self.max_batch)]
        if self.restart_delay is not None:
            extra += ["--restart-delay", str(self.restart_delay)]
        if self.min_batch_floor is not None:
            extra += ["--min-batch-floor", str(self.min_batch_floor)]
        if self.credentials_key is not None:
            extra += ["--credentials-key", os.fspath(self.credentials_key)]
        if self.quota is not None:
            extra += ["--quota", str(self.quota)]
        return [
            *entry_point("ldp-shuffler", "shuffler.cli"),
            "serve",
            "--db",
            self.db,
            "--collector",
            self.collector,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--interval",
            str(self.interval),
            *extra,
            *self.extra_args,
        ]
