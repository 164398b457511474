"""Sortable identifiers: a prefix plus a ULID (48-bit millisecond time, 80 random bits)."""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DIGIT_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]  # by a 10-bit value
_PAIR_SHIFTS = tuple(range(120, -1, -10))  # 130 bits = 13 pairs of digits, most significant first
# Of a ULID's 26 digits, the first 10 are the time (2 zero bits and the 48-bit ms timestamp),
# the other 16 its 80 random bits: 8 pairs.
_TIME_DIGITS = 10
_RANDOM_PAIR_SHIFTS = _PAIR_SHIFTS[-8:]


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
    value = (timestamp << 80) | random_bits80()
    # Two digits per lookup: ids are made for every quote, and this halves the loop.
    return "".join([_DIGIT_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def ulids(count: int, now_ms: int | None = None) -> list[str]:
    """`count` ULIDs of one millisecond (a batch's quotes): the time's digits written once,
    the random bits drawn together."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    time_digits = "".join([_DIGIT_PAIRS[(timestamp << 80 >> s) & 1023] for s in _PAIR_SHIFTS])
    time_digits = time_digits[:_TIME_DIGITS]
    return [
        time_digits + "".join([_DIGIT_PAIRS[(bits >> s) & 1023] for s in _RANDOM_PAIR_SHIFTS])
        for bits in random_bits80_each(count)
    ]


def new_quote_id() -> str:
    return f"q_{ulid()}"


def new_quote_ids(count: int) -> list[str]:
    """`count` quote ids at once (a batch's), as `new_quote_id` makes them (one alone by it:
    writing the shared millisecond apart only pays for several)."""
    if count == 1:
        return [new_quote_id()]
    return ["q_" + made for made in ulids(count)]


def new_observation_id() -> str:
    return f"o_{ulid()}"


def new_calibration_id() -> str:
    return f"c_{ulid()}"
