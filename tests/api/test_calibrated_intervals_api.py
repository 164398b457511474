"""Through HTTP, on SQLite or PostgreSQL: a calibration stores its fit's residual quantiles with
it, and the quotes its active fit moves state them (estimate x exp(quantile), widened to
bracket the estimate) and name the calibration behind their GPU."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from api_support import create_key, example_body, make_settings, quotes_client, running_client
from fastapi.testclient import TestClient

from service.db.engine import Database
from service.db.tables import Calibration

H100 = "H100-SXM5-80GB"
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct")


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    create_key(database_url, "setup", "estimate")  # keys required from the start
    with running_client(database_url) as test_client:
        yield test_client


def stored_quantiles(database_url: str, calibration_id: str) -> dict[str, dict[str, float]]:
    """The quantiles stored with the calibration's one GPU fit, by quantity."""
    database = Database(make_settings(database_url))
    try:
        with database.sessions.begin() as session:
            row = session.get(Calibration, calibration_id)
            assert row is not None
            (fit,) = row.payload["corrections"]["fits"]
            return {q["quantity"]: q for q in fit["quantiles"]}
    finally:
        database.dispose()


def test_a_calibrated_quote_states_its_calibrations_quantiles(
    client: TestClient, database_url: str
) -> None:
    """24 observations of two models, energy about x1.3 and time about x1.2 of the quotes:
    enough residuals from enough models for the calibration's quantiles to stand alone."""
    operator = quotes_client(client, create_key(database_url, "ivl", "estimate,observe"))
    admin = quotes_client(client, create_key(database_url, "ivl", "admin"))
    for i in range(24):
        body = example_body(
            model=MODELS[i % 2],
            workload={
                "batch_size": 1 + i % 4,
                "prompt_tokens": 256,
                "output_tokens": 64 * (1 + i % 3),
            },
        )
        quoted = operator.estimate(body)
        assert quoted.quote_id is not None
        observation = {
            "gpu_j": quoted.energy.gpu_j * 1.3 * (1 + 0.05 * (i % 5 - 2)),
            "total_s": quoted.latency.total_s * 1.2 * (1 + 0.04 * (i % 3 - 1)),
            "measured_with": "nvml",
            "measured_at": "2026-11-22T10:00:00Z",
        }
        operator.post_observation(quoted.quote_id, observation)
    created = admin.fit_calibration()
    (fit,) = created.fits
    assert fit.active and fit.n == 24
    stored = stored_quantiles(database_url, created.calibration_id)
    assert set(stored) == {"energy", "total"}
    for q in stored.values():
        assert (q["n"], q["groups"], q["lower_q"], q["upper_q"]) == (24, 2, 0.1, 0.9)
        assert q["lower_log"] <= q["upper_log"]

    after = operator.estimate(example_body())
    assert after.calibration_id == created.calibration_id
    energy, latency = after.energy, after.latency

    def ratios(quantity: str) -> tuple[float, float]:
        low, high = stored[quantity]["lower_log"], stored[quantity]["upper_log"]
        return min(math.exp(low), 1.0), max(math.exp(high), 1.0)

    low, high = ratios("energy")
    assert energy.gpu_j_low == pytest.approx(energy.gpu_j * low, rel=1e-12)
    assert energy.gpu_j_high == pytest.approx(energy.gpu_j * high, rel=1e-12)
    low, high = ratios("total")
    assert latency.total_s_low == pytest.approx(latency.total_s * low, rel=1e-12)
    assert latency.time_per_output_token_s_high == pytest.approx(
        latency.time_per_output_token_s * high, rel=1e-12
    )
    validation = after.validation  # the client package keeps it as the JSON object
    assert validation is not None
    held = validation["held_out"]["energy"]
    assert (held["level"], held["rows"]) == ("calibration", 24)
    assert held["mape_pct"] == pytest.approx(100 * stored["energy"]["mape"])
    rows = validation["gpu"]["measured_rows"]
    assert rows[f"calibration {created.calibration_id}"] == 24
    # an A100 quote is not moved, and keeps its level's intervals and validation
    a100 = operator.estimate(example_body(hardware={"gpu": "A100-SXM4-80GB", "count": 2}))
    assert a100.validation is not None
    assert a100.validation["held_out"]["energy"]["level"] != "calibration"
    assert not any(k.startswith("calibration") for k in a100.validation["gpu"]["measured_rows"])
