"""The engine and session factory, with bounded timeouts; SQLite runs in WAL mode."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DisconnectionError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from service.config import Settings
from service.db.sqlite_guard import OPENED_ON, SqliteGuard, is_lock_timeout
from service.db.wal_checkpoints import BACKSTOP_PAGES, checkpoints_in_background

logger = logging.getLogger(__name__)


def ensure_sqlite_directory(url: str) -> None:
    """Create the parent folder of a SQLite file URL (e.g. ./var) if it is missing."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)


def dump_json(document: Any) -> str:
    """JSON text of a column value: orjson (several times faster than the standard library on
    the ~5 KB quote documents stored with every estimate), the standard library for what
    orjson refuses (a float subclass, a non-string key)."""
    try:
        return orjson.dumps(document).decode()
    except TypeError:
        return json.dumps(document)


def sqlite_guard_for(settings: Settings) -> SqliteGuard | None:
    """The guard of the service's SQLite file (service/db/sqlite_guard.py); None for other
    databases and in-memory SQLite."""
    url = make_url(settings.database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return SqliteGuard(Path(str(url.database)), lock_backoff_s=settings.sqlite_lock_backoff_s)


def build_engine(settings: Settings, guard: SqliteGuard | None = None) -> Engine:
    """An engine whose every wait (connect, pool, lock, statement) is bounded; on SQLite,
    checked by `guard` (whose lock back-off its lock waits start)."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        ensure_sqlite_directory(settings.database_url)
        return _sqlite_engine(settings, settings.sqlite_busy_timeout_ms, guard=guard)
    return create_engine(
        url,
        connect_args=postgres_connect_args(settings),
        pool_pre_ping=True,
        pool_timeout=settings.db_pool_timeout_s,
        json_serializer=dump_json,
        json_deserializer=orjson.loads,
    )


def postgres_connect_args(settings: Settings) -> dict[str, Any]:
    """psycopg connection parameters bounding every wait on PostgreSQL (connect, statement,
    lock, a vanished server), beyond those of the URL."""
    options = f"-c statement_timeout={settings.db_statement_timeout_ms}"
    options += f" -c lock_timeout={settings.db_statement_timeout_ms}"
    return {
        "connect_timeout": max(1, round(settings.db_connect_timeout_s)),
        "options": options,
        # A server that vanished without closing the connection (network partition) is noticed
        # after unacknowledged sends for tcp_user_timeout [ms], or by keepalives when idle,
        # instead of after the kernel's ~15 min retransmission timeout.
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": max(1000, round(settings.db_connect_timeout_s * 1000)),
    }


class ReconnectBackoff:
    """Once a connection attempt has failed, refuse new ones at once for `backoff_s`, then let
    a single attempt through at a time until one succeeds.

    Without it every request would wait out the connect timeout again (for each of its
    database calls) while the database is away; with it only the probe does. Connections
    already in the pool are not affected (they are checked by pre-ping).
    """

    def __init__(self, backoff_s: float) -> None:
        self.backoff_s = backoff_s
        self._lock = threading.Lock()
        self._down = False
        self._retry_at = 0.0
        self._probing = False

    def install(self, engine: Engine) -> None:
        event.listen(engine, "do_connect", self._connect)

    def _connect(
        self, dialect: Dialect, _record: object, cargs: tuple[Any, ...], cparams: dict[str, Any]
    ) -> Any:
        dbapi = dialect.loaded_dbapi
        with self._lock:
            probe = self._down
            if probe and (self._probing or time.monotonic() < self._retry_at):
                wait_s = max(0.0, self._retry_at - time.monotonic())
                raise dbapi.OperationalError(
                    f"database unreachable at the last attempt; next attempt in {wait_s:.1f} s"
                )
            self._probing = self._probing or probe
        try:
            connection = dialect.connect(*cargs, **cparams)
        except dbapi.Error:
            with self._lock:
                if not self._down:
                    logger.warning("database unreachable; retrying every %.1f s", self.backoff_s)
                self._down, self._retry_at = True, time.monotonic() + self.backoff_s
                self._probing = self._probing and not probe
            raise
        with self._lock:
            if self._down:
                logger.info("database reachable again")
            self._down = False
            self._probing = self._probing and not probe
        return connection


def build_in_loop_engine(settings: Settings, guard: SqliteGuard | None = None) -> Engine | None:
    """SQLite (with `sqlite_commit_in_loop`): an engine on the same file that never waits for
    a lock (busy timeout 0), for commits made in the event loop thread
    (service/quotes/sqlite_sink.py); None for other databases."""
    url = make_url(settings.database_url)
    if url.get_backend_name() != "sqlite" or not settings.sqlite_commit_in_loop:
        return None
    # With a WalCheckpointer running, the loop's commits checkpoint only as a backstop.
    autocheckpoint = BACKSTOP_PAGES if checkpoints_in_background(settings) else None
    # Checked by `guard`, but its lock waits (none: busy timeout 0) start no back-off.
    return _sqlite_engine(
        settings,
        busy_timeout_ms=0,
        autocheckpoint_pages=autocheckpoint,
        guard=guard,
        notes_lock_timeouts=False,
    )


def _sqlite_engine(
    settings: Settings,
    busy_timeout_ms: int,
    autocheckpoint_pages: int | None = None,
    *,
    guard: SqliteGuard | None = None,
    notes_lock_timeouts: bool = True,
) -> Engine:
    engine = create_engine(
        settings.database_url,
        connect_args={"timeout": busy_timeout_ms / 1000},
        pool_timeout=settings.db_pool_timeout_s,
        json_serializer=dump_json,
        json_deserializer=orjson.loads,
    )
    _configure_sqlite(engine, busy_timeout_ms, autocheckpoint_pages)
    if guard is not None:
        _guard_sqlite(engine, guard, notes_lock_timeouts=notes_lock_timeouts)
    return engine


def _guard_sqlite(engine: Engine, guard: SqliteGuard, *, notes_lock_timeouts: bool) -> None:
    """`guard` checks each connection before it is opened, records the file it opened on
    before it is set up, discards it at checkout once that is no longer the file at the path,
    and checks each statement before it runs (SQLAlchemy reports what it raises as the
    driver's OperationalError); a lock wait that timed out starts its back-off."""

    @event.listens_for(engine, "do_connect")
    def _before_opening(_dialect: Dialect, record: Any, *_args: Any) -> None:
        record.info[OPENED_ON] = guard.check()  # returns None: the next listener connects

    @event.listens_for(engine, "connect", insert=True)
    def _before_setup(_dbapi_connection: sqlite3.Connection, record: Any) -> None:
        record.info[OPENED_ON] = guard.opened(record.info.get(OPENED_ON))

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection: sqlite3.Connection, record: Any, _proxy: Any) -> None:
        if guard.replaced(record.info.get(OPENED_ON)):  # the pool reconnects this entry
            raise DisconnectionError(f"database file {guard.path} moved or replaced")

    @event.listens_for(engine, "before_cursor_execute")
    def _before_statement(*args: Any) -> None:
        # (connection, cursor, statement, ...); the connection's `info` is its pool entry's
        guard.check(args[2], args[0].info.get(OPENED_ON))

    if notes_lock_timeouts:

        @event.listens_for(engine, "handle_error")
        def _on_error(context: Any) -> None:
            if is_lock_timeout(context.original_exception):
                guard.note_lock_timeout()


def _configure_sqlite(
    engine: Engine, busy_timeout_ms: int, autocheckpoint_pages: int | None
) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        if autocheckpoint_pages is not None:  # else SQLite's default, 1,000 pages
            cursor.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint_pages)}")
        cursor.close()


class Database:
    """The engine and session factory of one app (built once in the lifespan)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sqlite_guard = sqlite_guard_for(settings)
        self.engine = build_engine(settings, self.sqlite_guard)
        ReconnectBackoff(settings.db_reconnect_backoff_s).install(self.engine)
        self.sessions: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)
        self.in_loop_engine = build_in_loop_engine(settings, self.sqlite_guard)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def is_reachable(self) -> bool:
        """Whether a trivial query succeeds (within the configured timeouts)."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError:
            return False
        return True

    def write_problem(self) -> str | None:
        """Why a write would fail now although the database answers (SQLite: files that
        cannot be written, a write lock held by another process); None if none is known."""
        return self.sqlite_guard.write_problem() if self.sqlite_guard is not None else None

    def dispose(self) -> None:
        if self.sqlite_guard is not None:
            self.sqlite_guard.close()
        self.engine.dispose()
        if self.in_loop_engine is not None:
            self.in_loop_engine.dispose()
