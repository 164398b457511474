"""When to send a request again after a 429 or 503: `Retry-After` read, and the bounded policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({429, 503})


def retry_after_s(value: str | None, *, now: datetime | None = None) -> float | None:
    """`Retry-After` [s]: delta-seconds (`5`) or an HTTP date (RFC 9110); None when absent or
    unreadable. A date in the past gives 0."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of answers 429 and 503 (and of nothing else: a 4xx will not change).

    At most `max_retries` more attempts; each waits the answer's `Retry-After`, or
    `backoff_s` x 2^attempt without one. An answer asking for longer than `max_wait_s` is
    raised at once rather than waited for. `RetryPolicy(max_retries=0)` turns retries off."""

    max_retries: int = 2
    backoff_s: float = 0.5
    max_wait_s: float = 10.0

    def wait_s(self, status: int, retry_after: str | None, attempt: int) -> float | None:
        """Seconds to wait before retry number `attempt + 1` (attempt counts from 0), or None
        when the answer is final: not retryable, retries spent, or a wait past `max_wait_s`."""
        if status not in RETRYABLE_STATUSES or attempt >= self.max_retries:
            return None
        asked = retry_after_s(retry_after)
        wait = asked if asked is not None else self.backoff_s * 2**attempt
        return wait if wait <= self.max_wait_s else None


NO_RETRIES = RetryPolicy(max_retries=0)
