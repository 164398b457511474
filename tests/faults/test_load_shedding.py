"""Beyond capacity a worker refuses at once (503 + Retry-After, problem+json) instead of
queueing without bound; health stays up; held requests still complete."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from api_support import example_body, running_client, services_of
from httpx import Response

from service.api.load_shedding import ConcurrencyGate, LoadSheddingMiddleware

SHED_FAST_S = 0.2  # a full queue is refused without waiting (a queued one waits 0.3 s)


def test_gate_hands_slots_over_first_in_first_out() -> None:
    async def scenario() -> list[str]:
        gate = ConcurrencyGate(max_concurrent=1, max_queued=2, max_wait_s=5.0)
        order: list[str] = []
        assert await gate.acquire()

        async def waiter(name: str) -> None:
            assert await gate.acquire()
            order.append(name)
            gate.release()

        tasks = [asyncio.create_task(waiter(name)) for name in ("first", "second")]
        await asyncio.sleep(0)
        assert gate.queued == 2
        assert not await gate.acquire(), "a third waiter is refused: the queue holds two"
        gate.release()
        await asyncio.gather(*tasks)
        assert gate.active == 0 and gate.queued == 0
        return order

    assert asyncio.run(scenario()) == ["first", "second"]


def test_gate_sheds_a_waiter_after_the_longest_wait() -> None:
    async def scenario() -> tuple[bool, float, int]:
        gate = ConcurrencyGate(max_concurrent=1, max_queued=4, max_wait_s=0.05)
        await gate.acquire()
        started = time.monotonic()
        admitted = await gate.acquire()
        return admitted, time.monotonic() - started, gate.queued

    admitted, waited_s, queued = asyncio.run(scenario())
    assert not admitted and queued == 0
    assert 0.05 <= waited_s < 0.5


def test_a_cancelled_waiter_gives_its_slot_back() -> None:
    async def scenario() -> tuple[int, int]:
        gate = ConcurrencyGate(max_concurrent=1, max_queued=4, max_wait_s=5.0)
        await gate.acquire()
        waiting = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.release()
        return gate.active, gate.queued

    assert asyncio.run(scenario()) == (0, 0)


def shedding_gate(app: Any) -> ConcurrencyGate:
    """The gate of the app's LoadSheddingMiddleware (its middleware stack is built by now)."""
    layer = app.middleware_stack
    while not isinstance(layer, LoadSheddingMiddleware):
        layer = layer.app
    return layer.gate


def test_overload_is_shed_fast_and_health_stays_up(database_url: str) -> None:
    """Two slots, one queue place, 0.3 s wait: two held estimates fill the slots, a third waits
    and is shed after 0.3 s, a fourth finds the queue full and is shed at once.

    Held where an estimate waits for its pricing without holding the event loop."""
    settings = {"shed_max_concurrent": 2, "shed_max_queued": 1, "shed_max_queue_wait_s": 0.3}
    # One test client is one address: the per-client caps (test_client_caps.py) would refuse
    # it before the shedding does, so they are off here.
    caps_off = {"client_max_in_flight_per_ip": 0, "client_max_in_flight_per_key": 0}
    with running_client(database_url, **settings, **caps_off) as client:
        pricer = services_of(client).quotes.pricer
        original = pricer.price
        gate_open = threading.Event()
        entered = threading.Semaphore(0)

        async def held_price(*args: Any, **kwargs: Any) -> Any:
            entered.release()
            assert await asyncio.to_thread(gate_open.wait, 10)
            return await original(*args, **kwargs)

        pricer.price = held_price  # type: ignore[method-assign]

        def post() -> tuple[float, Response]:
            started = time.monotonic()
            response = client.post("/v1/estimate", json=example_body())
            return time.monotonic() - started, response

        with ThreadPoolExecutor(4) as pool:
            held: list[Future[tuple[float, Response]]] = [pool.submit(post) for _ in range(2)]
            for _ in range(2):
                assert entered.acquire(timeout=5), "the held estimates did not start"
            queued = pool.submit(post)
            gate = shedding_gate(client.app)
            deadline = time.monotonic() + 5
            while gate.queued < 1:  # until it waits for a slot
                assert time.monotonic() < deadline, "the third request did not queue"
                time.sleep(0.005)
            full_s, full = post()
            health = client.get("/v1/health")
            queued_s, queued_response = queued.result(timeout=5)
            gate_open.set()
            answers = [future.result(timeout=10) for future in held]

        assert health.status_code == 200
        for elapsed_s, response, bound in (
            (full_s, full, (0.0, SHED_FAST_S)),
            (queued_s, queued_response, (0.3, 1.0)),
        ):
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "1"
            assert response.headers["content-type"].startswith("application/problem+json")
            assert response.json()["type"].endswith("/overloaded")
            assert bound[0] <= elapsed_s < bound[1], f"shed after {elapsed_s:.3f} s"
        assert [response.status_code for _, response in answers] == [200, 200]
        assert all(response.json()["quote_id"] for _, response in answers)
        pricer.price = original  # type: ignore[method-assign]
        assert client.post("/v1/estimate", json=example_body()).status_code == 200
        metrics = client.get("/metrics").text
        assert 'status="503"' in metrics
