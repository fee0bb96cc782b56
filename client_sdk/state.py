"""The client's state directory: private, and owned by one process at a time.

Everything a client keeps (device secret, outbox, privacy ledger, campaign cache) lives in its
``state_dir``. Two rules hold for it:

* **Private.** The directory is mode 0700 and every file in it is created 0600 (SQLite creates
  its ``-wal`` and ``-shm`` files with the mode of the database file, so pre-creating the database
  0600 covers them). An existing directory that others can read is tightened, not trusted.
* **One owner.** A client takes an exclusive advisory lock (``flock``) on ``state_dir/lock`` for
  its whole life. A second client on the same directory, in this process or another, gets a
  :class:`StateDirLockedError` at once instead of interleaving outbox sequence numbers and
  losing reports. The lock is released by :meth:`StateDir.close` or when the process dies (the
  kernel drops ``flock`` locks with the file descriptor), so a crash never leaves it stuck.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "StateDir", "StateDirLockedError", "create_private_file", "fsync_directory"]

LOCK_FILE = "lock"

try:  # POSIX; on other systems the directory is private but not locked
    import fcntl
except ImportError:  # pragma: no cover - not reached on Linux or macOS
    fcntl = None  # type: ignore[assignment]


class StateDirLockedError(RuntimeError):
    """Another client (process or thread) already owns this ``state_dir``."""


def create_private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` with mode 0600 if it does not exist; tighten it if it does."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(descriptor, 0o600)  # whatever the umask was, or an older looser mode
    finally:
        os.close(descriptor)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename or link in ``directory`` durable (a no-op where directories cannot be
    opened, as on Windows)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class StateDir:
    """An exclusively locked, private ``state_dir`` (module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(os.path.expanduser(os.fspath(path)))
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if (self.path.stat().st_mode & 0o077) and hasattr(os, "chmod"):
            os.chmod(self.path, 0o700)
        lock_path = self.path / LOCK_FILE
        create_private_file(lock_path)
        self._descriptor: int | None = os.open(lock_path, os.O_RDWR)
        if fcntl is not None:
            try:
                fcntl.flock(self._descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(self._descriptor)
                self._descriptor = None
                raise StateDirLockedError(
                    f"state_dir {str(self.path)!r} is in use by another TelemetryClient "
                    "(one client process per state_dir); close it first or use another directory"
                ) from error

    def file(self, name: str) -> str:
        """The path of a private file in the directory (created 0600 if missing)."""
        path = self.path / name
        create_private_file(path)
        return str(path)

    def close(self) -> None:
        """Release the lock (idempotent)."""
        if self._descriptor is not None:
            with contextlib.suppress(OSError):
                if fcntl is not None:
                    fcntl.flock(self._descriptor, fcntl.LOCK_UN)
            os.close(self._descriptor)
            self._descriptor = None

    def __enter__(self) -> StateDir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
