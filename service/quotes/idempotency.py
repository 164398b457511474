"""Request fingerprints and the in-flight guard behind Idempotency-Key."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from service.errors import Conflict

# json.dumps with these options would build this encoder anew for every fingerprint.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)


def fingerprint(payload: Any) -> str:
    """SHA-256 of `payload` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(_CANONICAL.encode(payload).encode("utf-8")).hexdigest()


class InFlightGuard:
    """Idempotency keys whose first request is still being processed in this process.

    Across processes a claim row in the database does the same (`QuoteStore.claim`); while
    the database is away only this guard holds, and the unique (tenant, idempotency_key)
    constraint settles any race once it is back: the loser reads the winner's row back.
    """

    def __init__(self) -> None:
        self._held: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, tenant: str, key: str) -> Iterator[None]:
        """Hold `key` for `tenant` for the block; Conflict (409) if it is already held."""
        entry = (tenant, key)
        with self._lock:
            if entry in self._held:
                raise Conflict(
                    "a request with this Idempotency-Key is still in flight; retry later",
                    headers={"Retry-After": "1"},
                )
            self._held.add(entry)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(entry)
