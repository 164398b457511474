"""SQLite: no statement on a file that cannot be written, and no write queued behind a lock
that another process holds.

In WAL mode every connection maps the `-shm` file into memory and writes to it, readers
included (their read marks). A write to that mapping once the file cannot be written (made
immutable, a read-only remount) is not an error SQLite can return: the kernel kills the
process with SIGBUS. So before each statement, and before a connection is opened, the guard
checks that the database, `-wal` and `-shm` files can be written (`os.access`, a few
microseconds) and refuses with an ordinary `sqlite3.OperationalError` otherwise; the callers
already treat that as the database being away (quotes spooled or answered without an id,
other writes 503, health `degraded`). A connection is never opened while the files cannot be
written, so none is left read-only once they can be again.

The file at the path must also be the one the connections were opened on. An operator who
moves the file away or puts another in its place (`mv backup.sqlite3 quotes.sqlite3`) leaves
the open connections committing to the old file, which nobody reads: quotes answered as stored
would be lost. So each connection records the identity (st_dev, st_ino) of the file it was
opened on (`OPENED_ON` in its pool entry's `info`; the first connection, which creates the
file, records it after creating it), and every check compares the path's identity with it (one
`os.stat`, which also answers whether the file exists): a different or missing file refuses as
an unwritable one does (`FileReplaced`), and the engines discard such connections at checkout,
so the next one opens on the file now at the path. Once a connection was opened, a missing file
is not created again (an empty database would answer with no table), until one is put there.
The `-wal` and `-shm` files are named by the path, not by the file, and SQLite leaves them when
the file it had open was moved: a file put in place while the service runs is read with the
old file's WAL. Restore with the workers stopped (docs/operations.md).

A write that waited out the busy timeout (another process holding the write lock: a backup, a
migration, an operator's `BEGIN IMMEDIATE`) starts a back-off of `lock_backoff_s`, during which
writes fail at once while the lock is still held (asked without waiting) instead of each
waiting the busy timeout again: a request waits for at most one lock wait, not one per
database call, and requests do not queue behind waits. A free lock ends the back-off.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", "REPLACE")
LOCK_PROBE_TIMEOUT_S = 0.2  # health: a write lock held longer than this is reported
OPENED_ON = "sqlite_opened_on"  # key of a connection's FileId in its pool entry's `info`

FileId = tuple[int, int]
"""A file's identity: (st_dev, st_ino)."""


class FileReplaced(sqlite3.OperationalError):
    """The database file at the path is not the one the connection was opened on (moved
    away, deleted or replaced): the connection is to be discarded, not used again."""


def file_identity(path: str | Path) -> FileId | None:
    """The identity of the file at `path`; None when there is none (or it cannot be seen)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def unwritable_file(path: Path) -> Path | None:
    """The first of the database file at `path` and its `-wal` and `-shm` files that exists
    and cannot be written (the database file also when it is missing and its directory cannot
    be written, so SQLite could not create it); None when all can."""
    return DatabaseFiles(path).unwritable()


class DatabaseFiles:
    """The database file at `path` and its `-wal` and `-shm` files, named once: they are
    checked before every statement, and building their paths each time cost more than the
    checks' system calls."""

    __slots__ = ("_names", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        name = str(path)
        self._names = (name, name + "-wal", name + "-shm")

    def unwritable(self) -> Path | None:
        """As `unwritable_file`."""
        return self.problem(None, file_identity(self._names[0]))[1]

    def problem(
        self, opened_on: FileId | None, found: FileId | None
    ) -> tuple[str | None, Path | None]:
        """(Why not, the file that cannot be written) for a connection opened on the file
        `opened_on` (None: one about to be opened, or not known) when the path's file is
        `found`; (None, None) when nothing stops it."""
        database, wal, shm = self._names
        path = self.path
        if opened_on is not None and found != opened_on:
            state = "missing" if found is None else "another file"
            return (f"database file {path} is {state}, not the file the connection was "
                    "opened on (moved or replaced)", None)  # fmt: skip
        if not os.access(database, os.W_OK) and (
            found is not None or not os.access(path.parent, os.W_OK)
        ):
            return f"database file {path} cannot be written", path
        for side in (wal, shm):
            if not os.access(side, os.W_OK) and os.path.exists(side):
                return f"database file {side} cannot be written", Path(side)
        return None, None


class SqliteGuard:
    """The checks of the module doc for the database file at `path`; thread-safe."""

    def __init__(self, path: Path, *, lock_backoff_s: float) -> None:
        self.path = path
        self.files = DatabaseFiles(path)
        self.lock_backoff_s = lock_backoff_s
        self._locked_until = 0.0  # time.monotonic() [s]
        self._lock = threading.Lock()
        self._probe: sqlite3.Connection | None = None
        self._probe_on: FileId | None = None  # the file the probe was opened on
        self._probe_lock = threading.Lock()  # `_held` is asked from several threads
        self.opened_on: FileId | None = None  # the file the latest connection was opened on

    def check(self, statement: str | None = None, opened_on: FileId | None = None) -> FileId | None:
        """Raise sqlite3.OperationalError if the files cannot be written, FileReplaced if the
        file at the path is not `opened_on` (the file the statement's connection was opened
        on) or, for a writing `statement`, while the lock back-off lasts; `statement` None:
        opening a connection, which may create a missing file only if none was opened yet.
        Returns the identity of the file at the path (None: none, to be created)."""
        found = file_identity(self.files.path)
        if found is None and opened_on is None and self.opened_on is not None:
            opened_on = self.opened_on  # moved away: not created again as an empty database
        reason, unwritable = self.files.problem(opened_on, found)
        if reason is not None:
            raise (FileReplaced if unwritable is None else sqlite3.OperationalError)(reason)
        if statement is not None and self.locked() and _writes(statement) and self._held():
            raise sqlite3.OperationalError(
                "database is locked by another connection (writes fail at once for "
                f"{self.lock_backoff_s:g} s after a lock wait timed out)"
            )
        return found

    def opened(self, before: FileId | None) -> FileId:
        """The identity of the file a connection just opened on, recorded as the latest;
        `before`: the file at the path when it was checked before opening (None: none, which
        the connection created). FileReplaced when the file changed meanwhile (which of the
        two it opened is not known) or went away."""
        found = file_identity(self.files.path)
        if found is None or (before is not None and found != before):
            raise FileReplaced(f"database file {self.path} moved or replaced while opening")
        self.opened_on = found
        return found

    def replaced(self, opened_on: FileId | None) -> bool:
        """Whether the file at the path is not `opened_on` (a connection's file)."""
        return file_identity(self.files.path) != opened_on

    def note_lock_timeout(self) -> None:
        """A write waited out the busy timeout: start the back-off."""
        with self._lock:
            self._locked_until = time.monotonic() + self.lock_backoff_s

    def locked(self) -> bool:
        return time.monotonic() < self._locked_until

    def _held(self) -> bool:
        """Whether another connection still holds the write lock, asked without waiting (a
        `BEGIN IMMEDIATE` with busy timeout 0, rolled back); a free lock ends the back-off."""
        with self._probe_lock:
            try:
                if self._probe is not None and self.replaced(self._probe_on):
                    self.close()  # opened on a file no longer at the path
                if self._probe is None:
                    self._probe_on = file_identity(self.files.path)
                    self._probe = sqlite3.connect(
                        self._uri(), uri=True, timeout=0, isolation_level=None,
                        check_same_thread=False,
                    )  # fmt: skip
                self._probe.execute("BEGIN IMMEDIATE")
                self._probe.execute("ROLLBACK")
            except sqlite3.Error as error:
                if not is_lock_timeout(error):
                    self.close()
                return True
        with self._lock:
            self._locked_until = 0.0
        return False

    def close(self) -> None:
        """Close the probe's connection (it opens again when needed)."""
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()

    def _uri(self) -> str:
        return f"file:{quote(str(self.path.resolve()))}?mode=rw"  # never creates the file

    def write_problem(self) -> str | None:
        """Why a write would fail now, for health: files that cannot be written, or the write
        lock held by another connection for longer than LOCK_PROBE_TIMEOUT_S; None if none."""
        found = file_identity(self.files.path)
        if found is None and self.opened_on is not None:
            return f"database file {self.path.name} is missing (moved away since it was opened)"
        unwritable = self.files.problem(None, found)[1]
        if unwritable is not None:
            return f"database file {unwritable.name} cannot be written"
        if found is None:
            return None  # created at the first connection; no other can hold its lock
        try:
            probe = sqlite3.connect(
                self._uri(), uri=True, timeout=LOCK_PROBE_TIMEOUT_S, isolation_level=None
            )
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            finally:
                probe.close()
        except sqlite3.OperationalError as error:
            if is_lock_timeout(error):
                return f"database locked by another connection for over {LOCK_PROBE_TIMEOUT_S:g} s"
            return f"database cannot be written: {error}"
        return None


def _writes(statement: str) -> bool:
    return statement.lstrip()[:16].upper().startswith(WRITES)


def is_lock_timeout(error: BaseException) -> bool:
    """Whether `error` is SQLite's busy error (the write lock was not had in time)."""
    code = getattr(error, "sqlite_errorcode", None)  # absent on errors raised by Python code
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_BUSY
