"""A real collector process for the demo, the end-to-end tests and the benchmarks.

:class:`CollectorProcess` runs ``ldp-collector serve`` (gunicorn, real sockets, a real SQLite
file) on 127.0.0.1, waits until it announces its address and answers ``/healthz``, and stops
it. ``port=0`` picks a free port; :meth:`ServerProcess.restart` reuses the port it got, so
clients keep their URL. The process runs in its own session, so :meth:`ServerProcess.kill`
(SIGKILL) takes the gunicorn master and its workers down together, as a crash of the machine
would.

:class:`ServerProcess` is the part that does not depend on the collector: a command that prints
``<prefix> http://HOST:PORT`` once it listens and serves ``GET /healthz``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import requests

__all__ = ["CollectorProcess", "ServerProcess", "entry_point"]

_Server = TypeVar("_Server", bound="ServerProcess")


def entry_point(script: str, module: str) -> list[str]:
    """The installed console script (beside this interpreter, or on ``PATH``), else the module."""
    beside = Path(sys.executable).with_name(script)
    if beside.exists():
        return [str(beside)]
    found = shutil.which(script)
    return [found] if found else [sys.executable, "-m", module]


class ServerProcess:
    """A server subprocess that announces ``<ready_prefix> http://HOST:PORT`` on stdout.

    Subclasses give :attr:`name` (the log file names), :attr:`ready_prefix` and
    :meth:`arguments`. ``env`` is added to the environment of the child.
    """

    name = "server"
    ready_prefix = "serving"

    def __init__(
        self,
        *,
        log_dir: str | os.PathLike[str],
        port: int = 0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.port = port
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._starts = 0

    def arguments(self) -> list[str]:
        """The command line of the server (``self.port`` is the port to bind; 0: any)."""
        raise NotImplementedError

    def start(self: _Server, timeout: float = 30.0) -> _Server:
        """Start the process and return ``self`` once it answers ``/healthz``.

        ``RuntimeError`` (with the end of its stderr) when it exits or stays unready.
        """
        self._starts += 1
        out = self.log_dir / f"{self.name}-{self._starts}.out"
        err = self.log_dir / f"{self.name}-{self._starts}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            self.process = subprocess.Popen(
                self.arguments(),
                stdout=stdout,
                stderr=stderr,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the {self.name} exited with {self.process.returncode}: "
                    f"{err.read_text()[-2000:]}"
                )
            for line in out.read_text().splitlines():
                if line.startswith(f"{self.ready_prefix} http://"):
                    self.url = line[len(self.ready_prefix) :].split()[0].rstrip(",")
                    self.port = int(self.url.rsplit(":", 1)[1])
            if self.url and self._healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the {self.name} did not start within {timeout} s: {err.read_text()}")

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def kill(self) -> None:
        """SIGKILL the whole process group (master and workers): a crash, no clean-up."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (gunicorn's graceful shutdown), then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        else:
            # Workers may outlive a master that is already gone; never leave them behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def restart(self: _Server, timeout: float = 30.0) -> _Server:
        self.stop()
        self.url = ""
        return self.start(timeout)

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class CollectorProcess(ServerProcess):
    """A real ``ldp-collector serve`` subprocess (gunicorn) on 127.0.0.1 (module docstring).

    :param db: the database file; ``create=True`` passes ``--create`` (``serve`` refuses to
        create a missing database otherwise).
    :param token: the admin token (random by default), given as ``LDP_ADMIN_TOKEN``.
    :param log_dir: where ``collector-N.out``/``.err`` go (the database's folder by default).
    :param extra_args: more ``serve`` options.
    """

    name = "collector"
    ready_prefix = "ldp-collector: serving"

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        workers: int = 2,
        port: int = 0,
        token: str | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        extra_args: Sequence[str] = (),
        create: bool = True,
    ) -> None:
        self.db = os.fspath(db)
        self.workers = workers
        self.token = token or secrets.token_urlsafe(32)
        self.extra_args = list(extra_args)
        self.create = create
        super().__init__(
            log_dir=log_dir if log_dir is not None else Path(self.db).parent,
            port=port,
            env={"LDP_ADMIN_TOKEN": self.token},
        )

    @staticmethod
    def command() -> list[str]:
        """The installed ``ldp-collector`` entry point (or the module, if not on disk)."""
        return entry_point("ldp-collector", "collector.cli")

    def arguments(self) -> list[str]:
        return [
            *self.command(),
            "serve",
            "--db",
            self.db,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--no-access-log",
            *(["--create"] if self.create else []),
            *self.extra_args,
        ]

    def admin(self) -> dict[str, str]:
        """The admin ``Authorization`` header."""
        return {"Authorization": f"Bearer {self.token}"}

    def create_campaign(self, document: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/campaigns``; the served campaign (``RuntimeError`` if refused)."""
        response = requests.post(
            f"{self.url}/v1/campaigns", json=document, headers=self.admin(), timeout=30
        )
        if response.status_code not in (200, 201):
            raise RuntimeError(f"campaign creation failed: {response.status_code} {response.text}")
        return dict(response.json())
