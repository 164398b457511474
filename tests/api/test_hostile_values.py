"""Values that parse but no database or datetime can hold are 422 problems, never 500s: a
date-time whose conversion to UTC leaves years 1-9999, a cursor carrying such a time, a lone
surrogate or a NUL, and NUL characters in path ids and stored text (PostgreSQL refuses NUL)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient
from test_bad_input import assert_problem

# In UTC the first is 0000-12-31T23:00:00 and the second 10000-01-01T00:59:59: out of range.
OVERFLOWING = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


@pytest.fixture(scope="module")
def key(database_url: str) -> str:
    return create_key(database_url, "values", "admin")


@pytest.fixture(scope="module")
def client(database_url: str, key: str) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def quote_id(client: TestClient, key: str) -> str:
    answer = client.post("/v1/estimate", json=example_body(), headers=bearer(key))
    assert answer.status_code == 200, answer.text
    value: str = answer.json()["quote_id"]
    return value


def cursor_of(stamp: str, quote_id: str) -> str:
    """A cursor as the service encodes one, around chosen contents (`ensure_ascii` keeps a
    lone surrogate as its `\\udXXX` escape, as a forger would send it)."""
    raw = json.dumps([stamp, quote_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("stamp", OVERFLOWING)
@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_a_pull_bound_out_of_range_in_utc_is_a_422(
    client: TestClient, key: str, name: str, stamp: str
) -> None:
    answer = client.get("/v1/quotes", params={name: stamp}, headers=bearer(key))
    assert_problem(answer, 422, f"query.{name}")


@pytest.mark.parametrize(
    "contents",
    [
        (OVERFLOWING[0], "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC"),
        (OVERFLOWING[1], "q_01JDQ8Z3V5Q4XJ8M2W7K9T0ABC"),
        ("2026-11-22T10:00:00+00:00", "q_\ud800"),
        ("2026-11-22T10:00:00+00:00", "q_\x00"),
    ],
    ids=["year-0", "year-10000", "lone-surrogate", "nul"],
)
def test_a_forged_cursor_is_a_422(client: TestClient, key: str, contents: tuple[str, str]) -> None:
    answer = client.get("/v1/quotes", params={"cursor": cursor_of(*contents)}, headers=bearer(key))
    assert_problem(answer, 422, "query.cursor")


@pytest.mark.parametrize("stamp", OVERFLOWING)
def test_an_observation_measured_out_of_range_in_utc_is_a_422(
    client: TestClient, key: str, quote_id: str, stamp: str
) -> None:
    body = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": stamp}
    answer = client.post(f"/v1/quotes/{quote_id}/observations", json=body, headers=bearer(key))
    assert_problem(answer, 422, "measured_at")


@pytest.mark.parametrize("text", ["nv\x00ml", "nv\ud800ml"], ids=["nul", "lone-surrogate"])
def test_measured_with_that_cannot_be_stored_is_a_422(
    client: TestClient, key: str, quote_id: str, text: str
) -> None:
    body = {"gpu_j": 790.0, "measured_with": text, "measured_at": "2026-11-22T10:00:05Z"}
    answer = client.post(
        f"/v1/quotes/{quote_id}/observations",
        content=json.dumps(body),  # ensure_ascii: the surrogate travels as its escape
        headers={**bearer(key), "Content-Type": "application/json"},
    )
    assert_problem(answer, 422, "measured_with")
    stored = client.get(f"/v1/quotes/{quote_id}", headers=bearer(key)).json()
    assert all(o["measured_with"] != text for o in stored["observations"])


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/quotes/q_%00"),
        ("POST", "/v1/quotes/q_%00/observations"),
        ("GET", "/v1/calibrations/c_%00"),
    ],
)
def test_a_nul_in_a_path_id_is_a_422(client: TestClient, key: str, method: str, path: str) -> None:
    body = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:05Z"}
    answer = client.request(
        method, path, json=body if method == "POST" else None, headers=bearer(key)
    )
    problem = assert_problem(answer, 422)
    assert [error["loc"] for error in problem["errors"]] == [
        "path.calibration_id" if "calibrations" in path else "path.quote_id"
    ]
