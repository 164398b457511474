"""The SQLite guard's lock back-off: once started, writes fail at once while another
connection still holds the write lock (asked without waiting), reads go on, and a free lock
ends it; health's probe names the lock. (Files that cannot be written: tests/faults.)"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from service.db.sqlite_guard import FileReplaced, SqliteGuard, is_lock_timeout, unwritable_file


def test_a_missing_database_in_a_writable_directory_can_be_created(tmp_path: Path) -> None:
    assert unwritable_file(tmp_path / "new.sqlite3") is None
    assert SqliteGuard(tmp_path / "new.sqlite3", lock_backoff_s=1.0).write_problem() is None


def test_writes_fail_at_once_while_the_lock_is_held_and_resume_when_it_is_free(
    tmp_path: Path,
) -> None:
    path = tmp_path / "quotes.sqlite3"
    sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").close()
    guard = SqliteGuard(path, lock_backoff_s=30.0)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        assert "locked" in (guard.write_problem() or "")
        guard.check("INSERT INTO quotes VALUES (1)")  # no back-off yet: the write may wait
        guard.note_lock_timeout()
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            guard.check("  insert into quotes values (1)")
        with pytest.raises(sqlite3.OperationalError):
            guard.check("BEGIN IMMEDIATE")
        assert time.monotonic() - started < 0.1  # asked without waiting
        guard.check("SELECT 1")  # reads are not held up in WAL mode
        assert guard.locked()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    guard.check("UPDATE quotes SET id = 1")  # the lock is free: the back-off ends
    assert not guard.locked() and guard.write_problem() is None
    guard.close()


def test_only_sqlites_busy_error_is_a_lock_timeout(tmp_path: Path) -> None:
    path = tmp_path / "quotes.sqlite3"
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as busy:
        waiter.execute("BEGIN IMMEDIATE")
    blocker.execute("ROLLBACK")
    assert is_lock_timeout(busy.value)
    assert not is_lock_timeout(sqlite3.OperationalError("database is locked"))  # no code
    assert not is_lock_timeout(ValueError("busy"))


def test_a_statement_is_refused_once_its_file_is_no_longer_at_the_path(tmp_path: Path) -> None:
    path = tmp_path / "quotes.sqlite3"
    guard = SqliteGuard(path, lock_backoff_s=1.0)
    assert guard.check() is None  # no file yet: the first connection may create it
    sqlite3.connect(path).close()
    first = guard.opened(None)
    assert first == (os.stat(path).st_dev, os.stat(path).st_ino)
    guard.check("INSERT INTO quotes VALUES (1)", first)

    path.rename(tmp_path / "moved.sqlite3")
    with pytest.raises(FileReplaced, match="missing"):
        guard.check("INSERT INTO quotes VALUES (1)", first)
    with pytest.raises(FileReplaced):
        guard.check()  # not created again as an empty database
    assert "missing" in (guard.write_problem() or "")

    sqlite3.connect(path).close()  # another file put in its place
    with pytest.raises(FileReplaced, match="another file"):
        guard.check("SELECT 1", first)
    second = guard.check()
    assert second is not None and second != first
    assert guard.opened(second) == second == guard.opened_on
    guard.check("SELECT 1", second)
    assert guard.write_problem() is None
