"""PricingQueue (service/pricing_queue.py): the requests that wait in one event loop iteration
are priced in one call per tenant at the next, each answered with its own result; an error
answers only its own request; a request whose client went away is not priced."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from service.errors import InvalidRequest, ServiceError
from service.pricing_queue import PricingQueue
from service.schemas.estimate_request import EstimateRequest


def request(output_tokens: int) -> EstimateRequest:
    return EstimateRequest.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "workload": {"batch_size": 1, "prompt_tokens": 10, "output_tokens": output_tokens},
            "hardware": {"gpu": "H100-SXM5-80GB"},
        }
    )


class Recorder:
    """A `price_together` answering "<tenant>:<output tokens>", an InvalidRequest for 13
    output tokens, and raising (a bug) on 66 output tokens; it records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def __call__(
        self, requests: Sequence[EstimateRequest], tenant: str
    ) -> list[str | ServiceError]:
        tokens = [r.workload.output_tokens for r in requests]
        self.calls.append((tenant, tokens))
        if 66 in tokens:
            raise RuntimeError("a bug in pricing")
        return [InvalidRequest("thirteen") if t == 13 else f"{tenant}:{t}" for t in tokens]


async def settle(
    queue: PricingQueue[str], asks: list[tuple[int, str]]
) -> list[str | BaseException]:
    """Ask for every (output tokens, tenant) in one loop iteration."""
    return await asyncio.gather(
        *(queue.price(request(tokens), tenant) for tokens, tenant in asks),
        return_exceptions=True,
    )


def test_one_call_per_tenant_for_one_iteration() -> None:
    recorder = Recorder()
    queue = PricingQueue(recorder)
    answers = asyncio.run(settle(queue, [(1, "a"), (2, "b"), (3, "a"), (4, "a")]))
    assert answers == ["a:1", "b:2", "a:3", "a:4"]
    assert recorder.calls == [("a", [1, 3, 4]), ("b", [2])]


def test_a_later_iteration_is_priced_apart() -> None:
    recorder = Recorder()
    queue = PricingQueue(recorder)

    async def two_waves() -> list[str]:
        first = await settle(queue, [(1, "a"), (2, "a")])
        second = await settle(queue, [(3, "a")])
        return [*first, *second]  # type: ignore[list-item]

    assert asyncio.run(two_waves()) == ["a:1", "a:2", "a:3"]
    assert recorder.calls == [("a", [1, 2]), ("a", [3])]


def test_an_error_answers_its_own_request_only() -> None:
    recorder = Recorder()
    answers = asyncio.run(settle(PricingQueue(recorder), [(1, "a"), (13, "a"), (2, "a")]))
    assert answers[0] == "a:1" and answers[2] == "a:2"
    assert isinstance(answers[1], InvalidRequest) and str(answers[1]) == "thirteen"


def test_a_bug_fails_only_the_request_that_hits_it(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder()
    answers = asyncio.run(settle(PricingQueue(recorder), [(1, "a"), (66, "a"), (2, "a")]))
    assert answers[0] == "a:1" and answers[2] == "a:2"
    assert isinstance(answers[1], RuntimeError)
    # Together first; when that raises, each alone.
    assert recorder.calls == [("a", [1, 66, 2]), ("a", [1]), ("a", [66]), ("a", [2])]
    assert "pricing 3 requests together failed" in caplog.text


def test_a_request_whose_client_went_away_is_not_priced() -> None:
    recorder = Recorder()
    queue = PricingQueue(recorder)

    async def one_cancelled() -> list[str | BaseException]:
        gone = asyncio.ensure_future(queue.price(request(7), "a"))
        stays = asyncio.ensure_future(queue.price(request(8), "a"))
        await asyncio.sleep(0)  # both are waiting in the queue now
        gone.cancel()
        return await asyncio.gather(gone, stays, return_exceptions=True)

    answers = asyncio.run(one_cancelled())
    assert isinstance(answers[0], asyncio.CancelledError)
    assert answers[1] == "a:8"
    assert recorder.calls == [("a", [8])]
