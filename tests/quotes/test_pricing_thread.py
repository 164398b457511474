"""The pricing thread (service/quotes/pricing_thread.py): requests waiting while it prices are
priced together in its next pass, each answered with its own result or error, in order; a bug
answers every request of its pass and none hangs; a request whose caller left is not priced."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from service.errors import InvalidRequest
from service.quotes.pricing_thread import PricingThread
from service.schemas.estimate_request import EstimateRequest


class RecordingEstimator:
    """Answers each request with its prompt length, or an error for a prompt of 13 tokens;
    the first pass waits until `release` is set, so that the next requests queue behind it."""

    def __init__(self) -> None:
        self.passes: list[list[int]] = []
        self.release = threading.Event()
        self.fail_with: Exception | None = None

    def price(
        self,
        requests: Sequence[EstimateRequest],
        *,
        verbose: bool,
        calibration: Any,
        registered: Sequence[Any] | None = None,
    ) -> list[Any]:
        prompts = [r.workload.prompt_tokens for r in requests]
        self.passes.append(prompts)
        if len(self.passes) == 1:
            assert self.release.wait(5)
        if self.fail_with is not None:
            raise self.fail_with
        return [InvalidRequest("unlucky") if p == 13 else p for p in prompts]


def request(prompt: int) -> EstimateRequest:
    return EstimateRequest.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "workload": {"batch_size": 1, "prompt_tokens": prompt, "output_tokens": 1},
            "hardware": {"gpu": "H100-SXM5-80GB"},
        }
    )


async def scenario(estimator: RecordingEstimator, groups: list[list[int]]) -> list[Any]:
    pricer = PricingThread(estimator)  # type: ignore[arg-type]
    pricer.start()
    try:
        first = asyncio.create_task(pricer.price([request(1)]))
        while not estimator.passes:  # the first pass holds the thread
            await asyncio.sleep(0.001)
        waiting = [
            asyncio.create_task(pricer.price([request(p) for p in group])) for group in groups
        ]
        await asyncio.sleep(0.05)
        estimator.release.set()
        outcomes = await asyncio.gather(first, *waiting, return_exceptions=True)
        return list(outcomes)
    finally:
        pricer.stop()


def test_requests_waiting_are_priced_together_each_with_its_own_answer() -> None:
    estimator = RecordingEstimator()
    outcomes = asyncio.run(scenario(estimator, [[2, 3], [13], [4]]))
    assert estimator.passes == [[1], [2, 3, 13, 4]]  # one pass for all that waited
    assert outcomes[0] == [1]
    assert outcomes[1] == [2, 3]
    assert isinstance(outcomes[2][0], InvalidRequest)  # an error answers its own request
    assert outcomes[3] == [4]


def test_a_bug_answers_every_request_of_its_pass(caplog: pytest.LogCaptureFixture) -> None:
    estimator = RecordingEstimator()
    estimator.fail_with = RuntimeError("a bug")
    outcomes = asyncio.run(scenario(estimator, [[2], [3]]))
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert "pricing" in caplog.text


def test_a_request_whose_caller_left_is_not_priced() -> None:
    estimator = RecordingEstimator()

    async def run() -> None:
        pricer = PricingThread(estimator)  # type: ignore[arg-type]
        pricer.start()
        try:
            first = asyncio.create_task(pricer.price([request(1)]))
            while not estimator.passes:
                await asyncio.sleep(0.001)
            gone = asyncio.create_task(pricer.price([request(2)]))
            stays = asyncio.create_task(pricer.price([request(3)]))
            await asyncio.sleep(0.01)
            gone.cancel()
            estimator.release.set()
            assert await first == [1]
            assert await stays == [3]
        finally:
            pricer.stop()

    asyncio.run(run())
    assert estimator.passes == [[1], [3]]


def test_the_requests_of_one_loop_iteration_start_one_pass_together() -> None:
    """With the thread idle, the requests one event loop iteration adds are handed over at its
    end, together: the thread does not start a pass with the first while the loop adds the
    others (which would then wait for a second pass)."""
    estimator = RecordingEstimator()
    estimator.release.set()

    async def run() -> list[Any]:
        pricer = PricingThread(estimator)  # type: ignore[arg-type]
        pricer.start()

        async def caller(prompt: int) -> Any:
            time.sleep(0.02)  # parsing its body, say: the GIL is free, the thread could run
            return await pricer.price([request(prompt)])

        try:
            # Each task's first step (up to its `price` call) runs in the same iteration.
            return list(await asyncio.gather(*(caller(p) for p in (5, 6, 7))))
        finally:
            pricer.stop()

    assert asyncio.run(run()) == [[5], [6], [7]]
    assert estimator.passes == [[5, 6, 7]]


def test_a_thread_not_started_or_stopped_prices_nothing() -> None:
    estimator = RecordingEstimator()
    estimator.release.set()
    pricer = PricingThread(estimator)  # type: ignore[arg-type]

    async def price_one() -> list[Any]:
        return await pricer.price([request(5)])

    with pytest.raises(RuntimeError, match="not running"):
        asyncio.run(price_one())
    pricer.start()
    assert asyncio.run(price_one()) == [5]
    pricer.stop()
    with pytest.raises(RuntimeError, match="not running"):
        asyncio.run(price_one())
    assert estimator.passes == [[5]]
