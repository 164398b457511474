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


def test_keyed_lookups_parse_each_spool_file_once(tmp_path: Path) -> None:
    """A keyed estimate asks the spool whenever the database lacks its key, database up or
    not: 40 lookups over 30 files (10 written by this worker, 20 by another) parse only the
    other worker's 20, once each; a file replayed away leaves the index with it."""
    spool = QuoteSpool(tmp_path / "spool")
    other_worker = QuoteSpool(tmp_path / "spool")
    for n in range(10):
        spool.append([quote("acme", f"own-{n}"), quote("acme", None)])
    for n in range(20):
        other_worker.append([quote("acme", f"other-{n}"), quote("globex", f"other-{n}")])
    for n in range(40):
        assert spool.find("acme", f"new-{n}") is None
    assert spool.files_parsed == 20
    found = spool.find("globex", "other-7")
    assert found is not None and (found.tenant, found.idempotency_key) == ("globex", "other-7")
    assert spool.find("acme", "own-3") is not None and spool.files_parsed == 20
    (replayed,) = [path for path in spool.pending() if '"own-0"' in path.read_text()]
    replayed.unlink()  # as the replay does once the file is in the database
    assert spool.find("acme", "own-0") is None
    assert spool.find("acme", "own-1") is not None and spool.files_parsed == 20
