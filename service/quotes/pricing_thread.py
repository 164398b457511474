"""The pricing thread: every estimate of this process is priced on one thread beside the event
loop, and the requests that arrive while it is busy are priced together in its next pass.

Pricing is CPU-bound, so it must not run in the event loop (which would stop serving while it
prices); but many threads pricing at once would only take turns on the GIL. One thread prices
one list at a time with `Estimator.price`, which evaluates all of them, whatever their models and
deployments, in one array pass: under load the waiting requests form larger lists, and each
costs less. Each request is answered with its own result (or error), as if priced alone.

The requests an event loop iteration adds are handed to the thread together, at the end of that
iteration (as the quote sink hands over its groups): one queue put and one wake-up of the thread
per iteration, and a pass that starts with all of them, not with the first while the loop is
still parsing the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from service.catalog.registered import RegisteredArchitecture
from service.errors import ServiceError
from service.pricing.calibration import ActiveCalibration
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.quotes.handoff import STOP, settle_all, work_through
from service.schemas.estimate_request import EstimateRequest

logger = logging.getLogger(__name__)

Priced = PricedRequest | ServiceError
_Future = asyncio.Future[list[Priced]]
_Outcome = list[Priced] | BaseException
MAX_ITEMS_PER_PASS = 2000  # requests per pass (two full batches), give or take a hand-over


@dataclass(slots=True)
class _Job:
    """One caller's requests and the future its coroutine awaits on its event loop (not
    frozen, as `quote_sink.Pending`: one per request; none is changed once made)."""

    requests: Sequence[EstimateRequest]
    registered: Sequence[RegisteredArchitecture | None]
    verbose: bool
    calibration: ActiveCalibration | None
    future: asyncio.Future[list[Priced]]
    loop: asyncio.AbstractEventLoop


def _request_count(jobs: list[_Job]) -> int:
    return sum(len(job.requests) for job in jobs)


class PricingThread:
    """Prices requests on one thread (see the module doc); `start` before use, `stop` after."""

    def __init__(self, estimator: Estimator) -> None:
        self.estimator = estimator
        self.passes = 0  # pricing passes so far, for tests and diagnostics
        self._queue: queue.SimpleQueue[list[_Job] | object] = queue.SimpleQueue()
        # Per event loop, the jobs queued in its current iteration (see _hand_over).
        self._outboxes: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._thread = threading.Thread(target=self._run, name="pricing", daemon=True)
        # Whether the thread runs: what `Thread.is_alive()` answers, read on every request
        # without its lock and its two calls.
        self._running = False

    def start(self) -> None:
        self._running = True  # before the thread can end (and clear it)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Price what is queued, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(STOP)
            self._thread.join(timeout_s)

    async def price(
        self,
        requests: Sequence[EstimateRequest],
        *,
        verbose: bool = False,
        calibration: ActiveCalibration | None = None,
        registered: Sequence[RegisteredArchitecture | None] | None = None,
    ) -> list[Priced]:
        """`Estimator.price` of `requests` (`registered`: the registered model each names, if
        any), priced on the pricing thread with whatever else is waiting."""
        if not self._running:
            raise RuntimeError("the pricing thread is not running")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Priced]] = loop.create_future()
        models = registered or [None] * len(requests)
        job = _Job(requests, models, verbose, calibration, future, loop)
        outbox = self._outboxes.get(loop)
        if outbox is None:
            self._outboxes[loop] = [job]
            loop.call_soon(self._hand_over, loop)
        else:
            outbox.append(job)
        return await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        self._queue.put(self._outboxes.pop(loop))

    def _run(self) -> None:
        try:
            work_through(
                self._queue,
                _request_count,
                MAX_ITEMS_PER_PASS,
                lambda handed: self._price([job for jobs in handed for job in jobs]),
            )
        finally:
            self._running = False

    def _price(self, jobs: list[_Job]) -> None:
        """Price the jobs, those sharing a calibration and verbosity in one list, and hand
        each loop its jobs' results in one call."""
        self.passes += 1
        together: dict[tuple[int, bool], list[_Job]] = {}
        for job in jobs:
            if not job.future.cancelled():  # its client went away before it was priced
                together.setdefault((id(job.calibration), job.verbose), []).append(job)
        settled: dict[asyncio.AbstractEventLoop, list[tuple[_Future, _Outcome]]] = {}
        for same in together.values():
            requests = [request for job in same for request in job.requests]
            registered = [model for job in same for model in job.registered]
            try:
                results = self.estimator.price(
                    requests,
                    verbose=same[0].verbose,
                    calibration=same[0].calibration,
                    registered=registered,
                )
            except Exception as error:  # a bug: every waiting request answers it, none hangs
                logger.exception("pricing %d request(s) failed", len(requests))
                for job in same:
                    settled.setdefault(job.loop, []).append((job.future, error))
                continue
            start = 0
            for job in same:
                end = start + len(job.requests)
                settled.setdefault(job.loop, []).append((job.future, results[start:end]))
                start = end
        for loop, outcomes in settled.items():
            # RuntimeError: the loop closed meanwhile (shutdown), no one is waiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle_all, outcomes)
