"""Each error status's example in the OpenAPI document is what the service really answers with
that status: the same problem type, title and status."""

from __future__ import annotations

from typing import Any

from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient

from service.api.openapi import PROBLEM_EXAMPLES


def _same_problem(answer: Any, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body, example = answer.json(), PROBLEM_EXAMPLES[status]
    assert (body["type"], body["title"], body["status"]) == (
        example["type"],
        example["title"],
        example["status"],
    )


def test_each_example_is_the_problem_the_service_answers(database_url: str) -> None:
    gateway = create_key(database_url, "acme", "estimate")
    billing = create_key(database_url, "acme", "billing")
    with running_client(
        database_url, rate_limits={"estimate": 4}, rate_limit_window_s=3600
    ) as client:
        _same_problem(client.post("/v1/estimate", json=example_body()), 401)
        _same_problem(client.get("/v1/quotes", headers=bearer(gateway)), 403)
        missing = "/v1/quotes/q_00000000000000000000000000"
        _same_problem(client.get(missing, headers=bearer(billing)), 404)
        unknown_gpu = example_body(hardware={"gpu": "Z9000", "count": 1})
        _same_problem(client.post("/v1/estimate", json=unknown_gpu, headers=bearer(gateway)), 422)
        oversized = b'{"model": "' + b"x" * (3 * 1024 * 1024) + b'"}'
        headers = {**bearer(gateway), "content-type": "application/json"}
        _same_problem(client.post("/v1/estimate", content=oversized, headers=headers), 413)
        _same_problem(client.post("/v1/estimate", content=b'{"model": ', headers=headers), 400)
        as_text = {**bearer(gateway), "content-type": "text/plain"}
        _same_problem(client.post("/v1/estimate", content=b"{}", headers=as_text), 415)
        # 4 estimates an hour, spent by the unknown GPU, the 413, the 400 and the 415: refused.
        _same_problem(
            client.post("/v1/estimate", json=example_body(), headers=bearer(gateway)), 429
        )


def test_every_documented_error_has_its_own_example(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                content = response.get("content", {}).get("application/problem+json")
                if content is None:
                    continue
                example = content["example"]
                expected = 500 if status == "default" else int(status)
                assert example["status"] == expected, (method, path, status)
