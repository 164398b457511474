"""Hand-offs between event loops and a worker thread (the pricing thread, a quote sink's thread):
the thread takes what waits in its queue as one batch, and answers each loop's futures in one
call on that loop."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

STOP = object()
"""Put in a worker's queue to end it once it has worked through what was queued before."""


def take_waiting(
    work: queue.SimpleQueue[Any], first: T, size: Callable[[T], int], limit: int
) -> tuple[list[T], bool]:
    """`first` and the items waiting behind it in `work`, until their `size`s reach `limit`
    (give or take the last item); and whether STOP came next."""
    batch, count = [first], size(first)
    while count < limit:
        try:
            item = work.get_nowait()
        except queue.Empty:
            break
        if item is STOP:
            return batch, True
        batch.append(item)
        count += size(item)
    return batch, False


def work_through(
    work: queue.SimpleQueue[Any],
    size: Callable[[T], int],
    limit: int,
    handle: Callable[[list[T]], None],
) -> None:
    """A worker thread's loop: hand `handle` each batch of what waits in `work` (take_waiting),
    until STOP."""
    while True:
        first = work.get()
        if first is STOP:
            return
        batch, stop = take_waiting(work, first, size, limit)
        handle(batch)
        if stop:
            return


def settle_all(results: list[tuple[asyncio.Future[T], T | BaseException]]) -> None:
    """Answer each future with its result or exception (on the future's own loop); one whose
    caller went away is left as it is."""
    for future, outcome in results:
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
