"""SQLite: with commits in the event loop, WAL checkpoints are a background thread's
(service/db/wal_checkpoints.py), not the loop's commits'."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from db_support import quote_row
from fastapi.testclient import TestClient

from service.config import Settings
from service.db import migrate
from service.db.engine import build_in_loop_engine
from service.db.quote_document import CarbonFactorSet, QuoteDocument
from service.db.sqlite_quote_inserts import SqliteQuoteInserts
from service.db.tables import NewQuote
from service.db.wal_checkpoints import (
    BACKSTOP_PAGES,
    WalCheckpointer,
    checkpoints_in_background,
    wal_checkpointer_for,
)
from service.main import create_app

FACTORS = CarbonFactorSet.of('{"grid":{"value":250.0}}')
# One quote per transaction, each with a ~3 KB document: 400 commits write well over the
# 1,000 WAL pages at which SQLite's own checkpoint would run inside a commit.
COMMITS = 400
PADDING = "x" * 3000


@pytest.fixture
def database_file(tmp_path: Path) -> Iterator[Path]:
    """A migrated file, with a connection left open throughout: closing a file's last
    connection checkpoints its WAL, which the service's open pool never does."""
    path = tmp_path / "quotes.sqlite3"
    migrate.upgrade(f"sqlite:///{path}")
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("SELECT count(*) FROM quotes").fetchone()  # opens the WAL index
    yield path
    holder.close()


def commit_quotes(settings: Settings) -> None:
    """COMMITS one-quote transactions through the event loop's engine of `settings`."""
    engine = build_in_loop_engine(settings)
    assert engine is not None
    inserts = SqliteQuoteInserts(engine)
    members = f'{{"note":"{PADDING}","carbon":{{"pue":1.2,"factors":null}}}}'
    stamp = datetime.now(UTC)
    try:
        for i in range(COMMITS):
            quotes: list[NewQuote] = [
                quote_row(f"q-{i}", QuoteDocument.written(members, stamp, FACTORS), stamp)
            ]
            inserts.commit(quotes, set(), lambda: stamp)
    finally:
        inserts.close()
        engine.dispose()


def wal_pages(path: Path) -> int:
    with sqlite3.connect(path) as connection:
        page_bytes = connection.execute("PRAGMA page_size").fetchone()[0]
    return Path(f"{path}-wal").stat().st_size // page_bytes


def test_the_loop_leaves_checkpoints_to_the_checkpointer(database_file: Path) -> None:
    url = f"sqlite:///{database_file}"
    migrated_bytes = database_file.stat().st_size
    commit_quotes(Settings(database_url=url))  # a checkpointer's settings (the default)

    assert wal_pages(database_file) > 1000  # past SQLite's own threshold, not checkpointed:
    assert database_file.stat().st_size == migrated_bytes  # nothing copied into the file yet
    checkpointer = WalCheckpointer(database_file, interval_s=1.0)
    with sqlite3.connect(database_file, isolation_level=None) as connection:
        done = checkpointer.checkpoint(connection)
    assert not done.busy and done.wal_frames > 1000
    assert done.checkpointed_frames == done.wal_frames
    assert database_file.stat().st_size > migrated_bytes + COMMITS * len(PADDING)
    assert checkpointer.checkpoints == 1


def test_without_a_checkpointer_the_loop_checkpoints_as_sqlite_does(
    database_file: Path,
) -> None:
    url = f"sqlite:///{database_file}"
    migrated_bytes = database_file.stat().st_size
    commit_quotes(Settings(database_url=url, sqlite_checkpoint_interval_s=0))
    # SQLite's default: the commit that takes the WAL past 1,000 pages checkpoints it.
    assert database_file.stat().st_size > migrated_bytes


def test_the_thread_checkpoints_until_stopped(database_file: Path) -> None:
    commit_quotes(Settings(database_url=f"sqlite:///{database_file}"))
    checkpointer = WalCheckpointer(database_file, interval_s=0.02)
    checkpointer.start()
    try:
        deadline = time.monotonic() + 10
        while checkpointer.checkpoints < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        checkpointer.stop()
    assert checkpointer.checkpoints >= 2
    assert checkpointer.last is not None and not checkpointer.last.busy
    assert checkpointer.last.checkpointed_frames == checkpointer.last.wal_frames > 1000
    assert not checkpointer._thread.is_alive()


def test_a_missing_file_is_reported_once_and_not_created(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "gone.sqlite3"
    checkpointer = WalCheckpointer(missing, interval_s=0.01)
    with caplog.at_level(logging.WARNING, logger="service.db.wal_checkpoints"):
        checkpointer.start()
        time.sleep(0.2)
        checkpointer.stop()
    assert not missing.exists()
    assert checkpointer.checkpoints == 0
    warnings = [r for r in caplog.records if "WAL checkpoint" in r.getMessage()]
    assert len(warnings) == 1


def test_a_checkpointer_runs_only_for_a_sqlite_file_with_loop_commits(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.sqlite3'}"
    assert checkpoints_in_background(Settings(database_url=url))
    assert not checkpoints_in_background(Settings(database_url=url, sqlite_commit_in_loop=False))
    assert not checkpoints_in_background(Settings(database_url=url, sqlite_checkpoint_interval_s=0))
    assert not checkpoints_in_background(Settings(database_url="sqlite:///:memory:"))
    postgres = "postgresql+psycopg://quotes:quotes@127.0.0.1:1/quotes"
    assert wal_checkpointer_for(Settings(database_url=postgres)) is None
    checkpointer = wal_checkpointer_for(Settings(database_url=url))
    assert checkpointer is not None and checkpointer.path == tmp_path / "q.sqlite3"


def test_the_loop_engine_backstop_is_set_only_with_a_checkpointer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.sqlite3'}"
    for interval_s, pages in ((0.1, BACKSTOP_PAGES), (0.0, 1000)):
        engine = build_in_loop_engine(
            Settings(database_url=url, sqlite_checkpoint_interval_s=interval_s)
        )
        assert engine is not None
        with engine.connect() as connection:
            found = connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
        engine.dispose()
        assert found == pages


def thread_names() -> list[str]:
    return [thread.name for thread in threading.enumerate()]


def test_the_app_runs_the_checkpointer_while_it_serves(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    with TestClient(create_app(Settings(database_url=url))) as client:
        assert client.get("/v1/health").status_code == 200
        serving = thread_names()
    assert "wal-checkpoints" in serving
    assert "wal-checkpoints" not in thread_names()  # stopped (joined) at shutdown
