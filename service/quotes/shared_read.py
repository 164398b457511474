"""A cached database read refreshed once for all the requests that find it due at the same time.

The estimate path keeps a few answers in memory for a few seconds (the current calibrations,
whether any API key exists) and reads them again, on the thread pool, when they are due. Every
request that arrives while that read is under way finds the answer still due; each sending its
own read to the thread pool would start dozens of identical reads at once (as many as requests
in flight), each a thread hand-off that competes with the event loop for the GIL. Instead they
wait for the read under way, whose answer is as fresh as one they would have started: it began
less than `max_age_s` ago, the age within which the cache answers from memory anyway, and no
change was made since it began (the cache's `version` is the same: a change this process made
is read by the next request, not answered by a read that may predate it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from fastapi.concurrency import run_in_threadpool

T = TypeVar("T")


class SharedRead(Generic[T]):
    """`read` (blocking) run on the thread pool, shared by the callers that ask while it runs,
    it began less than `max_age_s` [s] ago and `version()` is unchanged. Used from one event
    loop."""

    def __init__(
        self, read: Callable[[], T], max_age_s: float, version: Callable[[], object] = int
    ) -> None:
        self.read = read
        self.max_age_s = max_age_s
        self.version = version
        self.reads = 0  # reads started, for tests and diagnostics
        self._under_way: asyncio.Future[T] | None = None
        self._began_at = 0.0  # time.monotonic() [s] when the read under way began
        self._began_version: object = None

    async def __call__(self) -> T:
        """The answer of a read that began less than `max_age_s` ago (its exception, if it
        raised)."""
        under_way = self._under_way
        now, version = time.monotonic(), self.version()
        if (
            under_way is None
            or under_way.done()
            or now - self._began_at >= self.max_age_s
            or version != self._began_version
        ):
            self.reads += 1
            self._began_at, self._began_version = now, version
            under_way = self._under_way = asyncio.ensure_future(run_in_threadpool(self.read))
        # Shielded: a caller that goes away does not cancel the read the others wait for.
        return await asyncio.shield(under_way)
