"""A durable local spool for quotes the database could not take, replayed into it later.

Each failed save becomes one JSON-lines file, written to a temporary name, fsynced and renamed
(so a file either holds whole quotes or does not exist). Only enable it on a disk that outlives
the process (a volume, not a container's scratch layer): a spooled quote's id is returned to
the caller and must eventually be found in the database.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from service.db.engine import Database
from service.db.ids import ulid
from service.db.quote_document import QuoteDocument
from service.db.repositories import QUOTE_COLUMNS, QuoteRepository
from service.db.store_outcomes import DuplicateIdempotencyKey, StoreRefused
from service.db.tables import NewQuote, Quote

CommitQuotes = Callable[[Sequence[Quote]], None]
"""Commits quotes as they are (their own `created_at`), raising StoreRefused or
DuplicateIdempotencyKey with nothing written: the quote store's `commit_replayed`."""

logger = logging.getLogger(__name__)


def _to_json(quote: NewQuote) -> dict[str, Any]:
    row = {name: getattr(quote, name) for name in QUOTE_COLUMNS}
    row["created_at"] = quote.created_at.isoformat()
    if isinstance(quote.response, QuoteDocument):
        # Spooled whole, factors in (no set to store first on replay).
        row["response"] = quote.response.as_dict()
        row["carbon_factor_set_id"] = None
    return row


def _from_json(row: dict[str, Any]) -> Quote:
    return Quote(**{**row, "created_at": datetime.fromisoformat(row["created_at"])})


SpooledKey = tuple[str, str]  # (tenant, idempotency key)


class QuoteSpool:
    """The spool directory (shared by the workers of one host) and this process's index of
    the idempotency keys in its files.

    A keyed estimate asks the spool for its key whenever the database does not hold it, so
    the index keeps that from reading the files: each file is parsed once per process (those
    this process writes, never), and a lookup lists the directory and reads at most the file
    that holds its key. `files_parsed` counts the files read to index them.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._keys_in: dict[str, set[SpooledKey]] = {}  # file name -> the keys it holds
        self._file_of: dict[SpooledKey, str] = {}  # key -> the (first indexed) file holding it
        self.files_parsed = 0

    def append(self, quotes: Sequence[NewQuote]) -> None:
        """Durably keep `quotes` (raises OSError when even the disk fails)."""
        final = self.directory / f"{ulid()}.jsonl"
        temporary = final.with_suffix(".tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            for quote in quotes:
                handle.write(json.dumps(_to_json(quote), sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        temporary.rename(final)
        directory_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
        keys = {(q.tenant, q.idempotency_key) for q in quotes if q.idempotency_key is not None}
        with self._index_lock:
            self._add_to_index(final.name, keys)

    def pending(self) -> list[Path]:
        return sorted(self.directory.glob("*.jsonl"))

    def find(self, tenant: str, idempotency_key: str) -> Quote | None:
        """A spooled quote of `tenant` under `idempotency_key`, if any: the index brought up
        to date with the directory (files another worker wrote parsed, files replayed
        dropped), then the one file holding the key read."""
        wanted = (tenant, idempotency_key)
        with self._index_lock:
            self._update_index(self.pending())
            name = self._file_of.get(wanted)
        if name is None:
            return None
        for quote in self._read(self.directory / name):
            if (quote.tenant, quote.idempotency_key) == wanted:
                return quote
        return None

    def _update_index(self, listed: list[Path]) -> None:
        names = {path.name for path in listed}
        orphaned: set[SpooledKey] = set()
        for gone in self._keys_in.keys() - names:
            for key in self._keys_in.pop(gone):
                if self._file_of.get(key) == gone:
                    del self._file_of[key]
                    orphaned.add(key)
        for key in orphaned:  # rare: a key spooled twice (two workers while the database was away)
            held_by = sorted(name for name, keys in self._keys_in.items() if key in keys)
            if held_by:
                self._file_of[key] = held_by[0]
        for path in listed:
            if path.name not in self._keys_in:
                self.files_parsed += 1
                quotes = self._read(path)
                keys = {(q.tenant, q.idempotency_key) for q in quotes if q.idempotency_key}
                self._add_to_index(path.name, keys)

    def _add_to_index(self, name: str, keys: set[SpooledKey]) -> None:
        self._keys_in[name] = keys
        for key in keys:
            self._file_of.setdefault(key, name)

    def replay(self, database: Database, commit: CommitQuotes) -> int:
        """Move spooled quotes into the database, oldest file first; returns how many moved.

        A quote whose id is stored already is skipped (a commit whose answer was lost may have
        written it); one whose idempotency key another quote took keeps its id, without the
        key. Each file is committed whole by `commit` (the store's INSERT); the first file the
        database refuses stays for the next attempt.
        """
        moved = 0
        with self._lock:
            for path in self.pending():
                try:
                    missing = _missing(database, self._read(path))
                    if missing:
                        commit(missing)
                except (StoreRefused, DuplicateIdempotencyKey, SQLAlchemyError) as error:
                    logger.info("spool replay deferred: %s", error)
                    break
                moved += len(missing)
                path.unlink(missing_ok=True)
        return moved

    @staticmethod
    def _read(path: Path) -> list[Quote]:
        """The quotes of a spool file; none when another thread or worker process sharing the
        directory has just replayed and removed it."""
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [_from_json(json.loads(line)) for line in lines if line.strip()]


def _missing(database: Database, quotes: list[Quote]) -> list[Quote]:
    """The spooled `quotes` not stored yet, each without its idempotency key if another quote
    holds it (its id was answered: the quote is kept, the key is not)."""
    missing: list[Quote] = []
    keys: set[tuple[str, str]] = set()
    with database.sessions() as session:
        repository = QuoteRepository(session)
        for quote in quotes:
            if repository.by_id(quote.id) is not None:
                continue
            key = quote.idempotency_key
            if key is not None and (
                (quote.tenant, key) in keys
                or repository.by_idempotency_key(quote.tenant, key) is not None
            ):
                quote.idempotency_key = None
            if quote.idempotency_key is not None:
                keys.add((quote.tenant, quote.idempotency_key))
            missing.append(quote)
    return missing


class SpoolReplayer:
    """A daemon thread replaying the spool every `interval_s` seconds until stopped."""

    def __init__(
        self, spool: QuoteSpool, database: Database, commit: CommitQuotes, interval_s: float
    ) -> None:
        self.spool = spool
        self.database = database
        self.commit = commit
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quote-spool", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 5)

    def _run(self) -> None:
        while True:
            try:
                moved = self.spool.replay(self.database, self.commit)
                if moved:
                    logger.info("replayed %d spooled quote(s) into the database", moved)
            except Exception:  # a bad file must not kill the thread; it is logged and kept
                logger.exception("spool replay failed")
            if self._stop.wait(self.interval_s):
                return
