"""``ldp-shuffler serve``'s watch over its forwarder child: restart it when it exits (with a
growing delay), and say so where operators look (docs/shuffler.md, "Forwarding and crashes").

The state lives in the shuffler's database (``ShufflerStorage.forwarder_state``), so every
gunicorn worker answers from it: ``/readyz`` is 503 ``forwarder-down`` from the moment the
forwarder is seen gone until a new one is started, and ``/metrics`` carries the restarts. Uploads
are still accepted meanwhile (they are committed and wait; the restarted forwarder resends any
batch formed and not yet acknowledged, which the collector answers idempotently).

The watch is a thread of gunicorn's master blocked in ``waitpid`` on the child. gunicorn reaps
every child it is signalled about (``waitpid(-1)``), so the exit status is sometimes gone
before this thread sees it: the log then says the status is unknown.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from shuffler.storage import ShufflerStorage

__all__ = ["ForwarderSupervisor", "describe_exit"]

SHUTDOWN_GRACE = 0.2
"""Seconds between seeing the forwarder gone and calling it down (a shutdown may be under way)."""


def describe_exit(status: int | None) -> str:
    """A ``waitpid`` status in words (``None``: reaped by someone else)."""
    if status is None:
        return "exited (status unknown: reaped by gunicorn)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


class ForwarderSupervisor:
    """Run ``command`` (the forwarder) as a child and restart it whenever it exits.

    The delay before a restart starts at ``first_delay`` seconds and doubles after each exit
    up to ``max_delay``; a forwarder that ran ``stable`` seconds or longer before exiting
    starts the sequence again.
    """

    def __init__(
        self,
        command: Sequence[str],
        db: str,
        *,
        first_delay: float = 1.0,
        max_delay: float = 30.0,
        stable: float = 60.0,
    ) -> None:
        self.command = list(command)
        self.db = db
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.stable = stable
        self.restarts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()

    def start(self) -> None:
        """Start the forwarder and its watch (the database's state says it is up)."""
        self._record(_started(0))
        self.process = subprocess.Popen(self.command)  # same process group: a SIGKILL takes both
        self._thread = threading.Thread(target=self._watch, name="ldp-forwarder-watch", daemon=True)
        self._thread.start()

    def stop_on_signals(self) -> None:
        """Chain the master's shutdown signals (call from gunicorn's ``when_ready``, after it
        installed its handlers): once one arrives, an exiting forwarder is not restarted."""
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            previous = signal.getsignal(number)

            def handler(signum: int, frame: Any, previous: Any = previous) -> None:
                self._stopping.set()
                if callable(previous):
                    previous(signum, frame)

            signal.signal(number, handler)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching and terminate the forwarder; only in the process that started it (a
        gunicorn worker, forked from the master, unwinds through the same ``finally``)."""
        if os.getpid() != self._owner:
            return
        self._stopping.set()
        first = self.process
        _terminate(first, timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        if self.process is not first:  # started by the watch just before it stopped
            _terminate(self.process, timeout)

    def _watch(self) -> None:
        delay = self.first_delay
        while True:
            process = self.process
            assert process is not None
            started = time.monotonic()
            status = _wait(process.pid)
            process.returncode = 0 if status is None else os.waitstatus_to_exitcode(status)
            # A SIGTERM to the whole process group reaches the forwarder and the master at
            # once: give the master's handler a moment to say it is a shutdown.
            if self._stopping.wait(SHUTDOWN_GRACE):
                return
            ran = time.monotonic() - started
            if ran >= self.stable:
                delay = self.first_delay
            what = describe_exit(status)
            self._record(functools.partial(ShufflerStorage.forwarder_down, how=what))
            _log(
                f"the forwarder (pid {process.pid}) {what} after {ran:.1f} s; reports wait "
                f"until it is back: restarting it in {delay:g} s"
            )
            while True:
                if self._stopping.wait(delay):
                    return
                delay = min(self.max_delay, max(delay * 2, 0.1))
                try:
                    self.process = subprocess.Popen(self.command)
                    break
                except OSError as error:
                    _log(f"the forwarder could not be started ({error}); retrying in {delay:g} s")
            self.restarts += 1
            self._record(_started(self.restarts))
            _log(f"the forwarder restarted (pid {self.process.pid}, restart {self.restarts})")

    def _record(self, change: Callable[[ShufflerStorage], object]) -> None:
        """Apply ``change`` to the database; an error is logged, never the end of the watch."""
        try:
            with ShufflerStorage(self.db) as storage:
                change(storage)
        except Exception as error:
            _log(f"could not record the forwarder's state ({type(error).__name__}: {error})")


def _started(restarts: int) -> Callable[[ShufflerStorage], object]:
    return functools.partial(ShufflerStorage.forwarder_started, restarts=restarts)


def _wait(pid: int) -> int | None:
    """The child's ``waitpid`` status; ``None`` if gunicorn's reaper got it first."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def _terminate(process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()


def _log(message: str) -> None:
    # gunicorn configures its own loggers, not the root one: the line is written here.
    print(f"ldp-shuffler serve: {message}", file=sys.stderr, flush=True)
