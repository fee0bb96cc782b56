"""A real ``ldp-analyze dashboard`` process (gunicorn) for the tests and the installed-package
smoke test (``scripts/smoke_installed.py``), on the :class:`collector.process.ServerProcess`
harness: a free loopback port, ready once it answers ``/healthz``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from collector.process import ServerProcess, entry_point

__all__ = ["DashboardProcess"]


class DashboardProcess(ServerProcess):
    """``ldp-analyze dashboard --db DB`` with the admin token ``token`` (``LDP_ADMIN_TOKEN``);
    ``extra_args`` are more ``dashboard`` options."""

    name = "dashboard"
    ready_prefix = "ldp-analyze dashboard: serving"

    def __init__(
        self,
        db: str | os.PathLike[str],
        token: str,
        log_dir: Path,
        *,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(log_dir=log_dir, env={"LDP_ADMIN_TOKEN": token})
        self.db = os.fspath(db)
        self.extra_args = list(extra_args)

    def arguments(self) -> list[str]:
        return [
            *entry_point("ldp-analyze", "analysis.cli"),
            "dashboard",
            "--db",
            self.db,
            "--port",
            str(self.port),
            "--poll-seconds",
            "1",
            "--no-access-log",
            *self.extra_args,
        ]
