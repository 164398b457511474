"""Another client holding the database's write lock, for the fault tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, make_url, text


@contextmanager
def database_locked(database_url: str) -> Iterator[None]:
    """Another client holds the write lock (SQLite) or the quotes table (PostgreSQL)."""
    if make_url(database_url).get_backend_name() == "sqlite":
        path = make_url(database_url).database
        assert path is not None
        blocker = sqlite3.connect(path, timeout=1, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        return
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            connection.execute(text("LOCK TABLE quotes IN ACCESS EXCLUSIVE MODE"))
            yield
            connection.rollback()
    finally:
        engine.dispose()
