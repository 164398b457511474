"""The estimate routes' `?verbose` and `Idempotency-Key`, read by FastAPI's own parameter parsing
only when sent (service/api/estimate_options.py): documented, converted and refused as FastAPI
does for a route that declares them."""

from __future__ import annotations

from typing import Any

from api_support import example_body
from fastapi import FastAPI
from fastapi.testclient import TestClient
from test_bad_input import assert_problem

from service.api.deps import IdempotencyKeyHeader
from service.api.estimate_options import ESTIMATE_OPTIONS, Verbose


def _declared_parameters() -> list[dict[str, Any]]:
    """The parameters FastAPI documents for a route declaring the two options itself."""
    app = FastAPI()

    @app.post("/v1/estimate")
    async def estimate(
        idempotency_key: IdempotencyKeyHeader = None, verbose: Verbose = False
    ) -> None:
        return None

    parameters: list[dict[str, Any]] = app.openapi()["paths"]["/v1/estimate"]["post"]["parameters"]
    return parameters


def test_the_openapi_document_lists_the_options_as_declared_parameters(
    client: TestClient,
) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    declared = _declared_parameters()
    assert [p["name"] for p in declared] == ["verbose", "Idempotency-Key"]
    assert paths["/v1/estimate"]["post"]["parameters"] == declared
    assert paths["/v1/estimate/batch"]["post"]["parameters"] == declared[:1]


def test_verbose_is_converted_as_a_boolean_query_parameter(client: TestClient) -> None:
    body = example_body()
    for value in ("true", "1", "yes", "on"):
        answer = client.post(f"/v1/estimate?verbose={value}", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["breakdown"]["kernels"], value
    for query in ("?verbose=false", "?verbose=0", "?unrelated=1", ""):
        answer = client.post(f"/v1/estimate{query}", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["breakdown"] is None, query
    batch = client.post("/v1/estimate/batch?verbose=true", json={"items": [body]})
    assert batch.json()["items"][0]["breakdown"]["kernels"]


def test_a_bad_option_is_refused_at_its_location(client: TestClient) -> None:
    body = example_body()
    for query in ("?verbose=maybe", "?verbose="):
        assert_problem(client.post(f"/v1/estimate{query}", json=body), 422, "query.verbose")
        batch = client.post(f"/v1/estimate/batch{query}", json={"items": [body]})
        assert_problem(batch, 422, "query.verbose")
    both = client.post(
        "/v1/estimate?verbose=maybe", json=body, headers={"Idempotency-Key": "has space"}
    )
    locs = {error["loc"] for error in assert_problem(both, 422)["errors"]}
    assert locs == {"query.verbose", "header.Idempotency-Key"}


def test_a_request_without_options_is_not_parsed_for_them() -> None:
    scope = {"type": "http", "query_string": b"", "headers": [(b"host", b"x")]}

    class Unread:  # any attempt to parse the query or the headers would fail
        def __init__(self) -> None:
            self.scope = scope

    assert ESTIMATE_OPTIONS.read(Unread()) == (None, False)  # type: ignore[arg-type]


def test_the_estimate_routes_document_the_bearer_key_they_ask_for(client: TestClient) -> None:
    """The caller the estimate routes ask for themselves is documented as a `RequireScope`
    dependency is on every other keyed route: the HTTP bearer scheme."""
    document = client.get("/openapi.json").json()
    keyed = document["paths"]["/v1/quotes"]["get"]["security"]  # a route declaring it itself
    assert keyed == [{"HTTPBearer": []}]
    assert document["paths"]["/v1/estimate"]["post"]["security"] == keyed
    assert document["paths"]["/v1/estimate/batch"]["post"]["security"] == keyed
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
