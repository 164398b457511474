"""The caller is checked before the body: a request without a valid key, or without the route's
scope, is refused as such whatever its body holds (it is not validated first); and a body
that is not UTF-8 is a 400, not JSON decoded from UTF-16."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from api_support import bearer, count_quotes, create_key, example_body, running_client
from fastapi.testclient import TestClient
from test_bad_input import assert_problem

INVALID_BODIES = [b'{"model": 12}', b'{"items": "none"}', b"{not json", b"\xff\xfe"]


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "billing": create_key(database_url, "admitted", "billing"),
        "estimate": create_key(database_url, "admitted", "estimate"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


@pytest.mark.parametrize("body", INVALID_BODIES)
@pytest.mark.parametrize("path", ["/v1/estimate", "/v1/estimate/batch", "/v1/calibrations"])
def test_a_key_without_the_scope_is_a_403_whatever_the_body(
    client: TestClient, keys: dict[str, str], path: str, body: bytes
) -> None:
    headers = {**bearer(keys["billing"]), "Content-Type": "application/json"}
    problem = assert_problem(client.post(path, content=body, headers=headers), 403)
    assert "scope" in problem["detail"]


@pytest.mark.parametrize("body", INVALID_BODIES)
def test_no_key_or_an_unknown_one_is_a_401_whatever_the_body(
    client: TestClient, body: bytes
) -> None:
    for headers in ({}, bearer("lq_000000000000_unknown")):
        answer = client.post(
            "/v1/estimate", content=body, headers={**headers, "Content-Type": "application/json"}
        )
        assert_problem(answer, 401)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_body_not_in_utf8_is_a_400_and_stores_nothing(
    client: TestClient, keys: dict[str, str], database_url: str, encoding: str
) -> None:
    before = count_quotes(database_url, tenant="admitted")
    answer = client.post(
        "/v1/estimate",
        content=json.dumps(example_body()).encode(encoding),
        headers={**bearer(keys["estimate"]), "Content-Type": "application/json"},
    )
    problem = assert_problem(answer, 400)
    assert "UTF-8" in problem["detail"]
    assert count_quotes(database_url, tenant="admitted") == before
    same_in_utf8 = client.post(
        "/v1/estimate", json=example_body(), headers=bearer(keys["estimate"])
    )
    assert same_in_utf8.status_code == 200
