"""The engine and session factory, with bounded timeouts; SQLite runs in WAL mode."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from service.config import Settings


def ensure_sqlite_directory(url: str) -> None:
    """Create the parent folder of a SQLite file URL (e.g. ./var) if it is missing."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)


def build_engine(settings: Settings) -> Engine:
    """An engine whose every wait (connect, pool, lock, statement) is bounded."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":
        ensure_sqlite_directory(settings.database_url)
        engine = create_engine(
            url,
            connect_args={"timeout": settings.sqlite_busy_timeout_ms / 1000},
            pool_timeout=settings.db_pool_timeout_s,
        )
        _configure_sqlite(engine, settings.sqlite_busy_timeout_ms)
        return engine
    options = f"-c statement_timeout={settings.db_statement_timeout_ms}"
    options += f" -c lock_timeout={settings.db_statement_timeout_ms}"
    connect_args: dict[str, Any] = {
        "connect_timeout": max(1, round(settings.db_connect_timeout_s)),
        "options": options,
    }
    return create_engine(
        url,
        connect_args=connect_args,
        pool_pre_ping=True,
        pool_timeout=settings.db_pool_timeout_s,
    )


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


class Database:
    """The engine and session factory of one app (built once in the lifespan)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = build_engine(settings)
        self.sessions: sessionmaker[Session] = sessionmaker(self.engine, expire_on_commit=False)

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

    def dispose(self) -> None:
        self.engine.dispose()
