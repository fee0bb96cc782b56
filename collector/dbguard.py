"""Acknowledged means durable: notice when the database file under a running collector is
deleted or replaced.

SQLite keeps writing to an open file after it was unlinked (or after another file was renamed
over its path): every upload is committed and acknowledged, and none of it survives a restart.
The web layer therefore records the database's identity (device and inode, ``os.stat``) when the
app is created and compares it at every connection checkout (each request) and again after an
upload commits; a missing or different file answers ``503`` instead of an acknowledgment. A
``stat`` costs a few microseconds, far below one upload's fsync.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3

from client_sdk.sqlite import immediate

__all__ = [
    "DatabaseReplaced",
    "FileIdentity",
    "check_identity",
    "file_identity",
    "write_probe",
]


class DatabaseReplaced(RuntimeError):
    """The database path no longer names the file the collector opened (deleted or replaced)."""


@dataclasses.dataclass(frozen=True)
class FileIdentity:
    """What names one file on a host: its device and inode numbers."""

    device: int
    inode: int


def file_identity(path: str | os.PathLike[str]) -> FileIdentity:
    """The identity of the file at ``path`` (``FileNotFoundError`` if there is none)."""
    status = os.stat(path)
    return FileIdentity(device=status.st_dev, inode=status.st_ino)


def check_identity(path: str | os.PathLike[str], expected: FileIdentity) -> None:
    """Raise :class:`DatabaseReplaced` unless ``path`` is still the file ``expected`` names."""
    try:
        current = file_identity(path)
    except FileNotFoundError:
        raise DatabaseReplaced(f"the database file {os.fspath(path)} was deleted") from None
    if current != expected:
        raise DatabaseReplaced(
            f"the database file {os.fspath(path)} was replaced (device/inode "
            f"{expected.device}/{expected.inode} -> {current.device}/{current.inode})"
        )


def write_probe(conn: sqlite3.Connection) -> None:
    """Commit a real write (``/readyz``): rewrite the newest ``schema_migrations`` row unchanged.

    Taking the write lock alone succeeds on a read-only database; an ``UPDATE`` that commits
    goes through the WAL and its fsync, so a read-only file, directory or mount (or a full disk)
    raises ``sqlite3.OperationalError`` here instead of on the next upload.
    """
    with immediate(conn):
        conn.execute(
            "UPDATE schema_migrations SET applied = applied "
            "WHERE version = (SELECT max(version) FROM schema_migrations)"
        )
