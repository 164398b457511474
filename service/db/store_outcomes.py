"""What became of a save: stored or spooled, or why not (the quote store's outcomes, shared
with the spool, which replays through the store)."""

from __future__ import annotations

from enum import StrEnum


class StoreFailed(Exception):
    """Neither the database nor the spool could take (or read) quotes right now."""


class StoreRefused(Exception):
    """The database refused a commit (unreachable, locked, a disk error): nothing written."""


class DuplicateIdempotencyKey(Exception):
    """Another request stored a quote under the same idempotency key first."""


class KeyClaimed(Exception):
    """Another process is pricing a request under the same idempotency key right now."""


class Saved(StrEnum):
    STORED = "stored"
    SPOOLED = "spooled"
