"""Durable SQLite connections and immediate transactions, shared by every SQLite user.

The device's outbox (``client_sdk.outbox``), its privacy ledger (``client_sdk.budget``) and the
collector's storage (``collector.storage``) open their databases with :func:`connect` and write
inside :func:`immediate`:

* ``isolation_level=None``: no implicit transactions; every write opens its own.
* WAL journal and ``synchronous=FULL`` by default: a committed transaction survives a power cut,
  not only a process crash (``NORMAL`` survives process crashes only).
* a busy timeout: a writer waits that long for another one before ``database is locked``.
* ``BEGIN IMMEDIATE``: the write lock is taken up front, so two writers never deadlock upgrading a
  read lock, and a check-then-write (the ledger's budget check) cannot interleave with another.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator

__all__ = ["SYNCHRONOUS_MODES", "connect", "immediate"]

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
"""SQLite's ``synchronous`` settings, weakest first."""


def connect(
    path: str | os.PathLike[str],
    *,
    timeout: float = 30.0,
    synchronous: str = "FULL",
    wal: bool = True,
    foreign_keys: bool = False,
    check_same_thread: bool = False,
    pragmas: Iterable[str] = (),
) -> sqlite3.Connection:
    """A connection in autocommit mode with the durability pragmas set.

    :param timeout: seconds to wait for another writer (SQLite's busy timeout).
    :param synchronous: one of :data:`SYNCHRONOUS_MODES` (``ValueError`` otherwise).
    :param wal: switch the database to the WAL journal now (``False`` leaves the journal mode to
        the caller: a read-only user need not write the header).
    :param foreign_keys: enforce ``REFERENCES`` constraints.
    :param check_same_thread: ``False`` lets one thread use the connection and another close it.
    :param pragmas: further ``PRAGMA`` statements (``"cache_size=-65536"``), run in order.

    The connection is closed again if a pragma fails.
    """
    mode = synchronous.upper() if isinstance(synchronous, str) else synchronous
    if mode not in SYNCHRONOUS_MODES:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}; got {synchronous!r}"
        )
    conn = sqlite3.connect(
        path, timeout=timeout, isolation_level=None, check_same_thread=check_same_thread
    )
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={mode}")
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys=ON")
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def immediate(
    conn: sqlite3.Connection,
    *,
    translate: Callable[[sqlite3.OperationalError], Exception] | None = None,
) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, rolled back on any exception.

    ``translate`` maps an ``OperationalError`` of ``BEGIN`` or ``COMMIT`` (a database still
    locked after the busy timeout, say) to the exception to raise instead; errors of the body
    propagate unchanged.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if translate is None:
            raise
        raise translate(error) from error
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except sqlite3.OperationalError as error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if translate is None:
            raise
        raise translate(error) from error
