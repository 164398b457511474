"""SQLite: WAL checkpoints run by a background thread instead of the event loop's commits.

In WAL mode a commit appends pages to the `-wal` file; a checkpoint copies them back into the
database file (and syncs both) so the WAL can start over. By default SQLite runs one inside the
commit that takes the WAL past 1,000 pages, on the committing connection. With the hot path
committing in the event loop (service/quotes/sqlite_sink.py), that commit is the loop's: a quote
writes about 7 pages, so every ~140th commit stalled the worker for a checkpoint of ~5 ms
(measured in process: 34 of 5,000 one-quote commits took over 1 ms, 4.8 ms on average, 26 % of
all commit time), and every request waiting in that worker waited for it.

Here the loop's connection checkpoints only as a backstop, past `BACKSTOP_PAGES` (a checkpointer
that died or fell far behind), and a thread of its own checkpoints every `interval_s` on its own
connection. A checkpoint runs in SQLite's C code with the GIL released, and does not hold the
write lock (writers keep appending meanwhile), so the loop is not held up by it.
`PASSIVE` checkpoints copy what they can without waiting for readers or writers; a checkpoint
that finds another one running (the other worker's) is skipped until the next interval.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import make_url

from service.config import Settings
from service.db.sqlite_guard import DatabaseFiles, FileId, file_identity

logger = logging.getLogger(__name__)

BACKSTOP_PAGES = 20_000
"""The loop connection's `wal_autocheckpoint` [pages of 4 KiB] while a checkpointer runs:
~80 MB of WAL, reached only if the checkpointer has not kept up for minutes."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What one `PRAGMA wal_checkpoint(PASSIVE)` answered."""

    busy: bool  # another checkpoint held the lock: nothing was done
    wal_frames: int  # frames in the WAL (-1: not in WAL mode)
    checkpointed_frames: int  # of those, frames now copied into the database file


class WalCheckpointer:
    """A daemon thread checkpointing the SQLite file at `path` every `interval_s`."""

    def __init__(self, path: Path, interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.path = path
        self.interval_s = interval_s
        self.checkpoints = 0  # completed (not busy), for tests and diagnostics
        self.last: Checkpoint | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the thread after its current checkpoint, if any."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def checkpoint(self, connection: sqlite3.Connection) -> Checkpoint:
        """One passive checkpoint on `connection` (the thread's; tests pass their own)."""
        busy, frames, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        done = Checkpoint(bool(busy), int(frames), int(copied))
        if not done.busy:
            self.checkpoints += 1
        self.last = done
        return done

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        opened_on: FileId | None = None  # the file `connection` was opened on
        failing = False
        files = DatabaseFiles(self.path)
        while not self._stop.wait(self.interval_s):
            try:
                found = file_identity(self.path)
                # moved or replaced: reopened next time; unwritable: else SIGBUS (sqlite_guard)
                reason, _ = files.problem(None if connection is None else opened_on, found)
                if reason is not None:
                    raise sqlite3.OperationalError(reason)
                if connection is None:
                    connection, opened_on = _open_existing(self.path), found
                self.checkpoint(connection)
                if failing:
                    logger.info("WAL checkpoints of %s succeed again", self.path)
                failing = False
            except sqlite3.Error as error:
                if not failing:  # once per failing spell, not every interval
                    logger.warning("WAL checkpoint of %s failed: %s", self.path, error)
                failing = True
                if connection is not None:
                    connection.close()
                    connection = None
        if connection is not None:
            connection.close()


def _open_existing(path: Path) -> sqlite3.Connection:
    """A connection to the database file at `path`, never creating one (a file that went
    away is an error to report, not an empty database to make), with busy timeout 0: a
    checkpoint never waits, the next interval tries again."""
    uri = f"file:{quote(str(path.resolve()))}?mode=rw"
    return sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)


def wal_checkpointer_for(settings: Settings) -> WalCheckpointer | None:
    """The checkpointer of the service's SQLite file, when the event loop commits to it and
    `sqlite_checkpoint_interval_s` is positive; None otherwise (SQLite's own checkpoints)."""
    if not checkpoints_in_background(settings):
        return None
    database = make_url(settings.database_url).database
    assert database is not None  # checkpoints_in_background checked it
    return WalCheckpointer(Path(database), settings.sqlite_checkpoint_interval_s)


def checkpoints_in_background(settings: Settings) -> bool:
    """Whether a WalCheckpointer takes the checkpoints off the event loop's connection."""
    url = make_url(settings.database_url)
    return (
        url.get_backend_name() == "sqlite"
        and settings.sqlite_commit_in_loop
        and settings.sqlite_checkpoint_interval_s > 0
        and url.database not in (None, "", ":memory:")
    )
