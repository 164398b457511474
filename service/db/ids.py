"""Sortable identifiers: a prefix plus a ULID (48-bit millisecond time, 80 random bits)."""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DIGIT_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]  # by a 10-bit value
_PAIR_SHIFTS = tuple(range(120, -1, -10))  # 130 bits = 13 pairs of digits, most significant first


RANDOM_BYTES = 10  # a ULID's 80 random bits


class _RandomDraws:
    """The OS's random bytes (os.urandom, as `secrets` draws them), fetched a page at a time.

    One system call per id would also hand the GIL away on every quote: the event loop thread
    then waits for it behind the pricing thread. Thread-safe; a forked child (a pre-forking
    server's worker) starts with none of its parent's bytes, so no two processes share any."""

    def __init__(self, page_bytes: int = 4096) -> None:
        self._page_bytes = page_bytes
        self._page = b""
        self._at = 0
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def bits80(self) -> int:
        with self._lock:
            at = self._at
            if at + RANDOM_BYTES > len(self._page):
                self._page, at = os.urandom(self._page_bytes), 0
            self._at = at + RANDOM_BYTES
            return int.from_bytes(self._page[at : at + RANDOM_BYTES], "big")

    def _forget(self) -> None:
        self._page, self._at, self._lock = b"", 0, threading.Lock()


random_bits80 = _RandomDraws().bits80
"""80 random bits from the OS, as an int (tests replace it)."""


def ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID; lexical order follows creation time to the ms."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    value = (timestamp << 80) | random_bits80()
    # Two digits per lookup: ids are made for every quote, and this halves the loop.
    return "".join([_DIGIT_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def new_quote_id() -> str:
    return f"q_{ulid()}"


def new_observation_id() -> str:
    return f"o_{ulid()}"


def new_calibration_id() -> str:
    return f"c_{ulid()}"
