"""Request fingerprints and the in-flight guard behind Idempotency-Key."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from service.errors import Conflict

# json.dumps with these options would build this encoder anew for every fingerprint.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

# Where orjson's compact, key-sorted text can differ from the json module's (which fingerprints
# stored before were taken with): escaped or non-ASCII characters (the json module writes
# \uXXXX), and floats below 1e-4 (json writes `1e-05`, orjson `0.00001` or `1e-5`).
_MAY_DIFFER = (b"\\", b"e-", b"0.0000")


def fingerprint(payload: Any, *, finite: bool = False) -> str:
    """SHA-256 of `payload` as canonical JSON (sorted keys, no spaces), as the json module
    writes it.

    `finite`: the caller knows every float in `payload` is finite (its model refuses NaN and
    Infinity, which orjson writes as null). The text is then written by orjson, several times
    faster, and kept when it cannot differ from the json module's (see _MAY_DIFFER)."""
    if finite:
        try:
            text = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not a JSON type: the json module's `default=str` writes it
            pass
        else:
            escaped, small_float, small_fixed = _MAY_DIFFER
            if (
                text.isascii()
                and escaped not in text
                and small_float not in text
                and small_fixed not in text
            ):
                return hashlib.sha256(text).hexdigest()
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
