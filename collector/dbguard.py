"""Acknowledged means durable, and secrets stay private: the checks every server database
(the collector's and the shuffler's) goes through.

Identity. SQLite keeps writing to an open file after it was unlinked (or after another file was
renamed over its path): every upload is committed and acknowledged, and none of it survives a
restart. The web layer therefore records the database's identity (device and inode, ``os.stat``)
when the app is created and compares it at every connection checkout (each request) and again
after an upload commits; a missing or different file answers ``503`` instead of an
acknowledgment. A ``stat`` costs a few microseconds, far below one upload's fsync.

Privacy. The collector's database holds the X25519 private keys that open every sealed
envelope; the shuffler's holds its id-digest key and the waiting envelopes. Both are created
mode 0600 (SQLite gives its ``-wal`` and ``-shm`` files the database's mode), in a folder made
0700 when the tool makes it (:func:`create_private_database`), and a server refuses a database,
``-wal`` or ``-shm`` that other users may read or write unless told to
(:func:`check_private_database`).

Readiness. A full disk is not seen by a write that rewrites pages in place: the WAL is reused
from its start after each checkpoint, so ``/readyz``'s probe also allocates new space
(:func:`space_probe`), as the next upload will.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import sqlite3
import stat

from client_sdk.sqlite import immediate
from client_sdk.state import create_private_file

__all__ = [
    "SPACE_PROBE_BYTES",
    "DatabaseExposed",
    "DatabaseReplaced",
    "FileIdentity",
    "check_identity",
    "check_private_database",
    "create_private_database",
    "file_identity",
    "space_probe",
    "write_probe",
]

SPACE_PROBE_BYTES = 1024 * 1024
"""What ``/readyz`` allocates: a few uploads' worth of new space."""
_DATABASE_SUFFIXES = ("", "-wal", "-shm")


class DatabaseExposed(PermissionError):
    """A server database (or its ``-wal``/``-shm``) that other users may read or write."""


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


def create_private_database(path: str | os.PathLike[str]) -> None:
    """Before SQLite opens ``path``: make its missing folders mode 0700 and the file, if it does
    not exist yet, mode 0600 (an existing file is left as it is: :func:`check_private_database`
    judges it)."""
    folder = os.path.dirname(os.path.abspath(path))
    missing = []
    while not os.path.exists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            continue  # made meanwhile by another process: not ours to change
        os.chmod(made, 0o700)  # whatever the umask
    if not os.path.exists(path):
        create_private_file(path)


def check_private_database(path: str | os.PathLike[str], *, allow_readable: bool = False) -> None:
    """Raise :class:`DatabaseExposed` when the database or its ``-wal``/``-shm`` grants any
    access to the group or to others, unless ``allow_readable``."""
    if allow_readable:
        return
    for suffix in _DATABASE_SUFFIXES:
        name = os.fspath(path) + suffix
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            raise DatabaseExposed(
                f"the database file {name} is readable by other users (mode {mode:04o}); it "
                f"holds secrets: run `chmod 600 {name}` (and 700 on its folder), or allow it "
                "explicitly (--allow-readable-db, LDP_ALLOW_READABLE_DB=1)"
            )


def space_probe(path: str | os.PathLike[str], size: int = SPACE_PROBE_BYTES) -> None:
    """Allocate ``size`` bytes of new space beside the database, fsync, remove: ``OSError``
    (``ENOSPC`` on a full disk) when the next upload could not be written either."""
    folder = os.path.dirname(os.path.abspath(path))
    probe = os.path.join(folder, f".{os.path.basename(path)}.probe-{secrets.token_hex(8)}")
    descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(descriptor, 0, size)
        else:  # pragma: no cover - platforms without fallocate write zeros instead
            os.write(descriptor, bytes(size))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
        os.unlink(probe)
