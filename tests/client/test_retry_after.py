"""Retry-After read as delta-seconds or an HTTP date, and the bounded retry policy's waits."""

from __future__ import annotations

from datetime import UTC, datetime

from llm_energy_quotes_client import NO_RETRIES, RetryPolicy
from llm_energy_quotes_client.retry_after import retry_after_s

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_s("5", now=NOW) == 5.0
    assert retry_after_s(" 0 ", now=NOW) == 0.0
    assert retry_after_s("Thu, 26 Nov 2026 12:00:07 GMT", now=NOW) == 7.0
    assert retry_after_s("Thu, 26 Nov 2026 11:59:00 GMT", now=NOW) == 0.0  # past: at once
    assert retry_after_s(None) is None
    assert retry_after_s("soon") is None
    assert retry_after_s("-3") is None


def test_policy_waits_retry_after_then_backs_off_and_stops() -> None:
    policy = RetryPolicy(max_retries=3, backoff_s=0.5, max_wait_s=10.0)
    assert policy.wait_s(429, "2", attempt=0) == 2.0
    assert policy.wait_s(503, None, attempt=0) == 0.5
    assert policy.wait_s(503, None, attempt=2) == 2.0  # 0.5 x 2^2
    assert policy.wait_s(503, "1", attempt=3) is None  # retries spent
    assert policy.wait_s(429, "11", attempt=0) is None  # longer than max_wait_s: raised
    for final in (400, 401, 404, 409, 422, 500):
        assert policy.wait_s(final, "1", attempt=0) is None
    assert NO_RETRIES.wait_s(429, "1", attempt=0) is None
