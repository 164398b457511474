"""OpenAPI: the problem responses each route declares, served as application/problem+json."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from service.schemas.common import Problem

_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}

_PROBLEMS: dict[int, dict[str, Any]] = {
    401: {
        "description": "No API key, or an unknown or revoked one",
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    },
    403: {"description": "The API key lacks the route's scope"},
    404: {"description": "Unknown id, or another tenant's (indistinguishable)"},
    409: {
        "description": "A request with the same Idempotency-Key is still in flight",
        "headers": _RETRY_AFTER,
    },
    413: {"description": "Request body over the size limit"},
    422: {
        "description": "Invalid request: `errors` names each field; unknown catalogue names "
        "come with `suggestions`"
    },
    503: {
        "description": "The database is unavailable; nothing was stored",
        "headers": _RETRY_AFTER,
    },
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route answering `codes` (and, like every route, 500) as problems."""
    responses: dict[int | str, dict[str, Any]] = {
        code: {"model": Problem, **_PROBLEMS[code]} for code in codes
    }
    responses["default"] = {"model": Problem, "description": "Unexpected error (500)"}
    return responses


class QuotesAPI(FastAPI):
    """FastAPI whose OpenAPI document gives error responses their problem+json media type."""

    def openapi(self) -> dict[str, Any]:
        schema = super().openapi()
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if (status == "default" or status[0] in "45") and "application/json" in content:
                        content["application/problem+json"] = content.pop("application/json")
        return schema
