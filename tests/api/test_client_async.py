"""AsyncQuotesClient against the app served in the test's event loop: the same answers as the
blocking client, the billing pull as an async iterator, observations and calibrations."""

from __future__ import annotations

import asyncio

import pytest
from api_support import create_key, example_body
from async_app import async_quotes, serving_app
from llm_energy_quotes_client import Conflict, Estimate, Forbidden, InvalidRequest, NotFound
from numpy.testing import assert_allclose


@pytest.mark.asyncio
async def test_async_estimates_match_and_idempotency_holds(database_url: str) -> None:
    async with serving_app(database_url) as http:
        quotes = async_quotes(http)
        health = await quotes.health()
        assert health.status == "ok"
        concurrent = await asyncio.gather(
            *(quotes.estimate(example_body(), idempotency_key=f"a-{i}") for i in range(4))
        )
        assert len({q.quote_id for q in concurrent}) == 4
        again = await quotes.estimate(example_body(), idempotency_key="a-2")
        assert again == concurrent[2]
        batch = await quotes.estimate_batch([example_body(), example_body(hardware={"gpu": "?"})])
        priced, problem = batch
        assert isinstance(priced, Estimate) and isinstance(problem, InvalidRequest)
        assert_allclose(priced.energy.gpu_j, concurrent[0].energy.gpu_j, rtol=1e-12)
        assert problem.errors[0].loc == "hardware.gpu"
        with pytest.raises(NotFound):
            await quotes.quote("q_00000000000000000000000000")


@pytest.mark.asyncio
async def test_async_billing_pull_observations_and_calibration(database_url: str) -> None:
    operator_key = create_key(database_url, "async", "estimate,billing,observe")
    admin_key = create_key(database_url, "async", "admin")
    async with serving_app(database_url) as http:
        operator, admin = async_quotes(http, operator_key), async_quotes(http, admin_key)
        created = [await operator.estimate(example_body()) for _ in range(5)]
        pulled = [q.quote_id async for q in operator.quotes(limit=2)]
        assert pulled == [q.quote_id for q in created]
        pages = [page async for page in operator.quote_pages(limit=2)]
        assert [len(p.items) for p in pages] == [2, 2, 1]
        assert pages[-1].next_cursor is None and pages[-1].resume_cursor is not None
        after_last = [q async for q in operator.quotes(cursor=pages[-1].resume_cursor)]
        assert after_last == []
        csv_pages = [p async for p in operator.quote_csv_pages(limit=3)]
        assert [p.text.count("\n") for p in csv_pages] == [4, 3]  # header + rows

        with pytest.raises(Forbidden):
            await operator.fit_calibration()
        assert await admin.current_calibration() is None
        quoted = created[0]
        assert quoted.quote_id is not None
        for _ in range(10):
            await operator.post_observation(
                quoted.quote_id,
                {
                    "gpu_j": quoted.energy.gpu_j * 2.0,
                    "measured_with": "nvml",
                    "measured_at": "2026-11-22T10:00:00Z",
                },
            )
        fitted = await admin.fit_calibration()
        assert (fitted.observations.fitted, fitted.observations.held_out) == (10, 10)  # k-fold
        assert fitted.holdout_mape_before == pytest.approx(0.5)
        current = await admin.current_calibration()
        assert current is not None and current.calibration_id == fitted.calibration_id
        calibrated = await operator.estimate(example_body())
        assert calibrated.calibration_id == fitted.calibration_id
        assert calibrated.energy.gpu_j == pytest.approx(
            quoted.energy.gpu_j * calibrated.energy.calibration_factor
        )
        rolled = await admin.rollback_calibration()
        assert (rolled.rolled_back, rolled.current) == (fitted.calibration_id, None)
        with pytest.raises(Conflict):
            await admin.rollback_calibration()
