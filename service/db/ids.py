"""Sortable identifiers: a prefix plus a ULID (48-bit millisecond time, 80 random bits)."""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DIGIT_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]  # by a 10-bit value
# A ULID's 26 digits (130 bits, most significant first) are 10 of time (2 zero bits and the
# 48-bit ms timestamp) and 16 of randomness (80 bits): 5 and 8 pairs of digits.
_TIME_PAIR_SHIFTS = (40, 30, 20, 10, 0)
_RANDOM_PAIR_SHIFTS = (70, 60, 50, 40, 30, 20, 10, 0)


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
        return int.from_bytes(self._take(RANDOM_BYTES), "big")

    def bits80_each(self, count: int) -> list[int]:
        """`count` draws of 80 bits, taken together (one lock, one slice)."""
        drawn = self._take(count * RANDOM_BYTES)
        return [
            int.from_bytes(drawn[at : at + RANDOM_BYTES], "big")
            for at in range(0, len(drawn), RANDOM_BYTES)
        ]

    def _take(self, size: int) -> bytes:
        """The next `size` bytes never handed out (a new page when this one has too few)."""
        with self._lock:
            at = self._at
            if at + size > len(self._page):
                self._page, at = os.urandom(max(self._page_bytes, size)), 0
            self._at = at + size
            return self._page[at : at + size]

    def _forget(self) -> None:
        self._page, self._at, self._lock = b"", 0, threading.Lock()


_draws = _RandomDraws()
random_bits80 = _draws.bits80
"""80 random bits from the OS, as an int (tests replace it)."""
random_bits80_each = _draws.bits80_each
"""`count` draws of `random_bits80`, together (tests replace it)."""


def ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID; lexical order follows creation time to the ms."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    return _time_digits(timestamp) + _random_digits(random_bits80())


def ulids(count: int, now_ms: int | None = None) -> list[str]:
    """`count` ULIDs of one millisecond (a batch's quotes): the time's digits written once,
    the random bits drawn together."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    time_digits = _time_digits(timestamp)
    return [time_digits + _random_digits(bits) for bits in random_bits80_each(count)]


def _time_digits(timestamp_ms: int) -> str:
    # Two digits per lookup: ids are made for every quote, and this halves the loop.
    return "".join([_DIGIT_PAIRS[(timestamp_ms >> shift) & 1023] for shift in _TIME_PAIR_SHIFTS])


def _random_digits(bits80: int) -> str:
    return "".join([_DIGIT_PAIRS[(bits80 >> shift) & 1023] for shift in _RANDOM_PAIR_SHIFTS])


def new_quote_id() -> str:
    return f"q_{ulid()}"


def new_quote_ids(count: int) -> list[str]:
    """`count` quote ids at once (a batch's), as `new_quote_id` makes them."""
    return ["q_" + made for made in ulids(count)]


def new_observation_id() -> str:
    return f"o_{ulid()}"


def new_calibration_id() -> str:
    return f"c_{ulid()}"
