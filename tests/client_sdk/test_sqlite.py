"""client_sdk.sqlite: the durable connection and the immediate transaction every SQLite user shares,
on real database files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from client_sdk.sqlite import SYNCHRONOUS_MODES, connect, immediate


def test_connect_sets_the_durability_pragmas(tmp_path: Path) -> None:
    conn = connect(tmp_path / "a.db", timeout=2.5, synchronous="full", foreign_keys=True)
    try:
        assert conn.isolation_level is None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        conn.close()


def test_connect_without_wal_leaves_the_journal_and_runs_extra_pragmas(tmp_path: Path) -> None:
    conn = connect(tmp_path / "b.db", synchronous="NORMAL", wal=False, pragmas=["cache_size=-128"])
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == -128
    finally:
        conn.close()


def test_an_unknown_synchronous_mode_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous must be one of OFF, NORMAL, FULL, EXTRA"):
        connect(tmp_path / "c.db", synchronous="SOMETIMES")
    assert SYNCHRONOUS_MODES == ("OFF", "NORMAL", "FULL", "EXTRA")


def test_immediate_commits_and_rolls_back_on_any_exception(tmp_path: Path) -> None:
    conn = connect(tmp_path / "d.db")
    try:
        conn.execute("CREATE TABLE t (x INTEGER)")
        with immediate(conn) as same:
            assert same is conn and conn.in_transaction
            conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(KeyError), immediate(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            raise KeyError("boom")
        assert not conn.in_transaction
        assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        conn.close()


class Busy(RuntimeError):
    pass


def test_immediate_takes_the_write_lock_up_front_and_translates_a_busy_database(
    tmp_path: Path,
) -> None:
    path = tmp_path / "e.db"
    holder = connect(path)
    waiter = connect(path, timeout=0.05)
    try:
        holder.execute("CREATE TABLE t (x INTEGER)")
        with immediate(holder):
            holder.execute("INSERT INTO t VALUES (1)")
            # The lock is held from BEGIN: a second writer cannot even begin.
            with pytest.raises(sqlite3.OperationalError, match="locked"), immediate(waiter):
                pass
            translated = immediate(waiter, translate=lambda error: Busy(str(error)))
            with pytest.raises(Busy) as info, translated:
                pass
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        with immediate(waiter):
            waiter.execute("INSERT INTO t VALUES (2)")
        assert holder.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    finally:
        holder.close()
        waiter.close()
