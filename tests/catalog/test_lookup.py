"""Near-match suggestions for unknown catalogue names, remembered per name."""

from __future__ import annotations

from service.catalog.lookup import _near_matches, near_matches

CANDIDATES = ["meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "L4"]


def test_typos_get_the_closest_names_then_substring_matches() -> None:
    assert near_matches("meta-llama/llama-3.1-8b-instrct", CANDIDATES)[0] == CANDIDATES[0]
    # no close spelling, but the last path segment is a substring of both Llama ids
    assert near_matches("someone/Llama-3.1", CANDIDATES, limit=2) == CANDIDATES[:2]
    assert near_matches("zzzz", CANDIDATES) == []


def test_a_repeated_unknown_name_is_answered_from_memory() -> None:
    _near_matches.cache_clear()
    first = near_matches("meta-llama/Llama-3.1-9B", CANDIDATES)
    again = near_matches("meta-llama/Llama-3.1-9B", CANDIDATES)
    assert first == again
    assert _near_matches.cache_info().hits == 1
    again.append("mutated")  # callers get their own list: the memory is not changed
    assert near_matches("meta-llama/Llama-3.1-9B", CANDIDATES) == first
