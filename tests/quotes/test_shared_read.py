"""SharedRead: the requests that find a cached answer due while its read is under way wait for
that read instead of each starting one; a read too old, or begun before a change, is not
joined; a caller going away does not cancel the read the others wait for."""

from __future__ import annotations

import asyncio
import threading

import pytest

from service.quotes.shared_read import SharedRead

CALLERS = 20


class BlockingRead:
    """A read that counts its runs and holds until `release` is set (a slow database)."""

    def __init__(self) -> None:
        self.runs = 0
        self.threads: set[int] = set()
        self.release = threading.Event()
        self.started = threading.Event()

    def __call__(self) -> int:
        self.runs += 1
        run = self.runs  # this run's number, its answer
        self.threads.add(threading.get_ident())
        self.started.set()
        self.release.wait(5.0)
        return run


async def _until_started(read: BlockingRead) -> None:
    await asyncio.get_running_loop().run_in_executor(None, read.started.wait, 5.0)


def test_callers_arriving_during_a_read_share_it() -> None:
    async def scenario() -> None:
        read = BlockingRead()
        shared = SharedRead(read, max_age_s=60.0)
        callers = [asyncio.ensure_future(shared()) for _ in range(CALLERS)]
        await _until_started(read)
        read.release.set()
        answers = await asyncio.gather(*callers)
        assert answers == [1] * CALLERS
        assert read.runs == 1 and shared.reads == 1
        assert threading.get_ident() not in read.threads  # on the thread pool, not the loop
        # Once it is done, the next caller (its cache found due again) starts a new read.
        assert await shared() == 2

    asyncio.run(scenario())


def test_a_read_older_than_max_age_is_not_joined() -> None:
    async def scenario() -> None:
        read = BlockingRead()
        shared = SharedRead(read, max_age_s=0.0)  # the cache never answers from memory
        callers = [asyncio.ensure_future(shared()) for _ in range(3)]
        await _until_started(read)
        read.release.set()
        await asyncio.gather(*callers)
        assert read.runs == 3 and shared.reads == 3

    asyncio.run(scenario())


def test_a_read_begun_before_a_change_is_not_joined() -> None:
    async def scenario() -> None:
        read = BlockingRead()
        version = [0]
        shared = SharedRead(read, max_age_s=60.0, version=lambda: version[0])
        before = asyncio.ensure_future(shared())
        await _until_started(read)
        version[0] += 1  # e.g. this process made another calibration current
        after = asyncio.ensure_future(shared())
        await asyncio.sleep(0.05)
        read.release.set()
        assert await before == 1
        assert await after == 2  # its own read, begun after the change
        assert shared.reads == 2

    asyncio.run(scenario())


def test_a_caller_that_goes_away_does_not_cancel_the_read() -> None:
    async def scenario() -> None:
        read = BlockingRead()
        shared = SharedRead(read, max_age_s=60.0)
        leaving, staying = asyncio.ensure_future(shared()), asyncio.ensure_future(shared())
        await _until_started(read)
        leaving.cancel()
        read.release.set()
        assert await staying == 1
        with pytest.raises(asyncio.CancelledError):
            await leaving

    asyncio.run(scenario())


def test_every_waiting_caller_gets_the_reads_error() -> None:
    def failing() -> int:
        raise RuntimeError("database gone")

    async def scenario() -> None:
        shared = SharedRead(failing, max_age_s=60.0)
        results = await asyncio.gather(*(shared() for _ in range(5)), return_exceptions=True)
        assert all(isinstance(r, RuntimeError) for r in results)
        assert shared.reads == 1

    asyncio.run(scenario())
