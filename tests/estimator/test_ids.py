"""Quote, observation and calibration ids: ULIDs (26 Crockford base32 digits, time first)."""

from __future__ import annotations

import pytest

from service.db import ids


@pytest.fixture
def no_randomness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids, "random_bits80", lambda: 0)


@pytest.mark.usefixtures("no_randomness")
def test_the_time_is_written_in_the_first_ten_digits() -> None:
    assert ids.ulid(0) == "0" * 26
    # 1 ms sets bit 80: the lowest bit of the 10th digit (digits of 5 bits from the right).
    assert ids.ulid(1) == "0" * 9 + "1" + "0" * 16
    # 32 ms: bit 85, the 9th digit.
    assert ids.ulid(32) == "0" * 8 + "1" + "0" * 17


def test_the_largest_ulid_is_the_specifications(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ULID specification: "the largest valid ULID ... is 7ZZZZZZZZZZZZZZZZZZZZZZZZZ".
    monkeypatch.setattr(ids, "random_bits80", lambda: (1 << 80) - 1)
    assert ids.ulid(2**48 - 1) == "7" + "Z" * 25


def test_digits_are_crockfords_and_ids_sort_by_time() -> None:
    times_ms = (1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000)
    made = [ids.ulid(now_ms) for now_ms in times_ms]
    assert all(len(u) == 26 and set(u) <= set("0123456789ABCDEFGHJKMNPQRSTVWXYZ") for u in made)
    assert made == sorted(made)
    assert ids.new_quote_id().startswith("q_") and len(ids.new_quote_id()) == 28


def test_random_bits_are_drawn_a_page_at_a_time_and_never_reused() -> None:
    """Each id takes the next 10 bytes of a page of OS randomness: 1,000 ids from pages of 64
    bytes (6 ids each) are all different, and every draw is an 80-bit value."""
    draws = ids._RandomDraws(page_bytes=64)
    values = [draws.bits80() for _ in range(1000)]
    assert len(set(values)) == 1000
    assert all(0 <= value < 1 << 80 for value in values)
    assert max(values).bit_length() > 70  # random, not zero-padded
