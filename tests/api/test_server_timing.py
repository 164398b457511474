"""Estimates answer a Server-Timing header: the milliseconds spent pricing and storing."""

from __future__ import annotations

import re

from api_support import example_body
from fastapi.testclient import TestClient

_TIMING = re.compile(r"^pricing;dur=(\d+\.\d\d), storing;dur=(\d+\.\d\d)$")


def _durations_ms(header: str) -> tuple[float, float]:
    match = _TIMING.match(header)
    assert match is not None, header
    return float(match.group(1)), float(match.group(2))


def test_an_estimate_and_a_batch_say_where_their_time_went(client: TestClient) -> None:
    single = client.post("/v1/estimate", json=example_body())
    assert single.status_code == 200
    pricing_ms, storing_ms = _durations_ms(single.headers["server-timing"])
    assert pricing_ms > 0.0 and storing_ms >= 0.0
    batch = client.post("/v1/estimate/batch", json={"items": [example_body()] * 3})
    assert batch.status_code == 200
    pricing_ms, storing_ms = _durations_ms(batch.headers["server-timing"])
    assert pricing_ms > 0.0 and storing_ms >= 0.0
