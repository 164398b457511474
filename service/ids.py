"""Sortable identifiers: a prefix plus a ULID (48-bit millisecond time, 80 random bits)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID; lexical order follows creation time to the ms."""
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    value = (timestamp << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_quote_id() -> str:
    return f"q_{ulid()}"


def new_observation_id() -> str:
    return f"o_{ulid()}"


def new_calibration_id() -> str:
    return f"c_{ulid()}"
