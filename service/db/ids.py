"""Sortable identifiers: a prefix plus a ULID (48-bit millisecond time, 80 random bits)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_DIGIT_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]  # by a 10-bit value
_PAIR_SHIFTS = tuple(range(120, -1, -10))  # 130 bits = 13 pairs of digits, most significant first


def ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID; lexical order follows creation time to the ms."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    value = (timestamp << 80) | secrets.randbits(80)
    # Two digits per lookup: ids are made for every quote, and this halves the loop.
    return "".join([_DIGIT_PAIRS[(value >> shift) & 1023] for shift in _PAIR_SHIFTS])


def new_quote_id() -> str:
    return f"q_{ulid()}"


def new_observation_id() -> str:
    return f"o_{ulid()}"


def new_calibration_id() -> str:
    return f"c_{ulid()}"
