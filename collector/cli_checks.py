"""Checks of command-line paths and ports, so a bad flag is one line naming it, not a traceback.

Used by ``ldp-collector`` and ``ldp-analyze``: a ``--db`` that is a folder, lies in a missing
folder or is not a SQLite file; a ``--port`` another process listens on; an ``--out`` that
cannot be written. Each raises ``ValueError`` with the flag, the value and the reason.
"""

from __future__ import annotations

import os
import socket
import sqlite3

__all__ = [
    "SQLITE_HEADER",
    "check_database_path",
    "check_output_path",
    "check_port_free",
    "database_error_message",
]

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database file."""


def check_database_path(path: str, *, flag: str = "--db", must_exist: bool = False) -> None:
    """``ValueError`` when ``path`` cannot be a collector database (module docstring)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist (or is not a folder)")
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a folder, not a SQLite database file")
    if not os.path.exists(path):
        if must_exist:
            raise ValueError(
                f"{flag}: no collector database at {path} (create one with "
                f"`ldp-collector init-db --db {path}`)"
            )
        return
    if os.path.getsize(path) == 0:
        return  # what sqlite3.connect leaves behind: treated as a new database
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise ValueError(f"{flag} {path}: cannot be read ({error.strerror})") from None
    if header != SQLITE_HEADER:
        raise ValueError(f"{flag} {path} is not a SQLite database (no SQLite header)")


def database_error_message(flag: str, path: object, error: sqlite3.Error) -> str:
    """One line for an SQLite error that escaped the checks (a damaged file, a full disk)."""
    return f"{flag} {path}: the database cannot be used: {error}"


def check_output_path(path: str, *, flag: str = "--out") -> None:
    """``ValueError`` when a file cannot be written at ``path`` (checked before any work)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{flag} {path}: the folder {folder} does not exist (or is not a folder)")
    if os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a folder; give a file name")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path}: not writable by this user")


def check_port_free(host: str, port: int, *, flag: str = "--port") -> None:
    """``ValueError`` when ``host:port`` cannot be bound (in use, or an address not local).

    The socket is bound with ``SO_REUSEADDR``, as gunicorn binds it, then closed at once.
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise ValueError(f"--host {host}: cannot be resolved ({error.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise ValueError(
                f"{flag} {port}: cannot listen on {host}:{port} ({error.strerror}); another "
                f"server may be using it: stop it, pick another port, or pass {flag} 0 for a "
                "free one"
            ) from None
