"""The quote spool: durable files, replay through the quote store that skips quotes already
stored, keeps each quote's created_at, and never breaks on an idempotency key taken meanwhile
(by a stored quote, or by another quote of the same file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from db_support import quote

from service.config import Settings
from service.db import migrate
from service.db.engine import Database
from service.db.quote_store import QuoteStore
from service.db.repositories import QuoteRepository
from service.db.spool import QuoteSpool


def test_replay_moves_quotes_and_frees_clashing_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    database = Database(Settings(database_url=url))
    spool = QuoteSpool(tmp_path / "spool")
    taken = quote("acme", "k1")
    with database.sessions.begin() as session:
        QuoteRepository(session).add(taken)
    spooled = [
        quote("acme", "k1"),
        quote("acme", "k2"),
        quote("acme", None),
        quote("acme", "k3"),
        quote("acme", "k3"),
    ]
    spool.append(spooled)
    assert spool.find("acme", "k2") is not None and spool.find("globex", "k2") is None
    store = QuoteStore(database)
    assert spool.replay(database, store.commit_replayed) == 5
    assert spool.pending() == []
    with database.sessions() as session:
        repository = QuoteRepository(session)
        assert all(repository.by_id(q.id) is not None for q in spooled)
        assert repository.by_idempotency_key("acme", "k1").id == taken.id  # type: ignore[union-attr]
        assert repository.by_id(spooled[0].id).idempotency_key is None  # type: ignore[union-attr]
        assert repository.by_idempotency_key("acme", "k3").id == spooled[3].id  # type: ignore[union-attr]
        assert repository.by_id(spooled[4].id).idempotency_key is None  # type: ignore[union-attr]
        for q in spooled:
            assert repository.by_id(q.id).created_at == q.created_at  # type: ignore[union-attr]
    assert spool.replay(database, store.commit_replayed) == 0
    database.dispose()


def test_a_file_removed_by_another_worker_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers share the spool directory: a file listed by one may be replayed and removed by
    another before it is read."""
    url = f"sqlite:///{tmp_path / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    database = Database(Settings(database_url=url))
    spool = QuoteSpool(tmp_path / "spool")
    spool.append([quote("acme", "gone")])
    listed = spool.pending()
    store = QuoteStore(database)
    other_worker = QuoteSpool(tmp_path / "spool")
    assert other_worker.replay(database, store.commit_replayed) == 1
    monkeypatch.setattr(spool, "pending", lambda: listed)
    assert spool.find("acme", "gone") is None
    assert spool.replay(database, store.commit_replayed) == 0
    database.dispose()
