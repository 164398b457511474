"""Case-insensitive lookup by id or alias, with near-match suggestions for typos."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


def normalise(name: str) -> str:
    return name.strip().lower()


def build_index(entries: Iterable[tuple[str, Iterable[str]]]) -> dict[str, str]:
    """Map every normalised id and alias to its id; raise on a name claimed twice."""
    index: dict[str, str] = {}
    for entry_id, aliases in entries:
        for name in (entry_id, *aliases):
            key = normalise(name)
            if index.setdefault(key, entry_id) != entry_id:
                raise ValueError(f"catalogue name {name!r} belongs to {index[key]} and {entry_id}")
    return index


def near_matches(name: str, candidates: Iterable[str], limit: int = 5) -> list[str]:
    """Up to `limit` catalogue names closest to `name` (by difflib ratio, then substring).

    Remembered per name: the difflib search costs milliseconds over a large catalogue, and a
    misconfigured client repeats the same unknown name on every request."""
    return list(_near_matches(name, tuple(candidates), limit))


@lru_cache(maxsize=2048)
def _near_matches(name: str, pool: tuple[str, ...], limit: int) -> tuple[str, ...]:
    lowered = {normalise(c): c for c in pool}
    close = difflib.get_close_matches(normalise(name), list(lowered), n=limit, cutoff=0.5)
    found = [lowered[c] for c in close]
    needle = normalise(name).split("/")[-1]
    for candidate in pool:
        if len(found) >= limit:
            break
        if needle and needle in normalise(candidate) and candidate not in found:
            found.append(candidate)
    return tuple(found)
