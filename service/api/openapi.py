"""OpenAPI: the problem responses each route declares, served as application/problem+json."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from service.schemas.common import Problem

_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}

RATE_LIMIT_HEADERS = {
    "RateLimit-Policy": {
        "description": 'The quota: `"<scope>";q=<requests>;w=<window seconds>`',
        "schema": {"type": "string"},
    },
    "RateLimit": {
        "description": 'What is left: `"<scope>";r=<requests left>;t=<seconds to reset>`',
        "schema": {"type": "string"},
    },
}

_PROBLEMS: dict[int, dict[str, Any]] = {
    400: {"description": "The body is not parseable JSON (or nests deeper than the parser allows)"},
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
    429: {
        "description": "The API key's rate limit for the route's scope is spent",
        "headers": {**_RETRY_AFTER, **RATE_LIMIT_HEADERS},
    },
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


def operation_id(route: APIRoute) -> str:
    """A route's operationId: its function's name (unique: tests/api checks)."""
    return route.name


class QuotesAPI(FastAPI):
    """FastAPI whose OpenAPI document gives error responses their problem+json media type."""

    def openapi(self) -> dict[str, Any]:
        schema = super().openapi()  # cached by FastAPI: every change below is idempotent
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                if _requires_key(operation):
                    _declare_rate_limits(operation["responses"])
                if "requestBody" in operation:
                    operation["responses"].setdefault("400", _problem_response(400))
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if (status == "default" or status[0] in "45") and "application/json" in content:
                        content["application/problem+json"] = content.pop("application/json")
        return schema


def _requires_key(operation: dict[str, Any]) -> bool:
    """Keyed operations: security declared, and no empty (anonymous) alternative."""
    security = operation.get("security", [])
    return bool(security) and {} not in security


def _declare_rate_limits(responses: dict[str, Any]) -> None:
    """Every keyed operation may answer 429, and its answers carry the RateLimit headers."""
    responses.setdefault("429", _problem_response(429))
    for status, response in responses.items():
        if status[0] in "2":
            response.setdefault("headers", {}).update(RATE_LIMIT_HEADERS)


def _problem_response(status: int) -> dict[str, Any]:
    problem = {"schema": {"$ref": "#/components/schemas/Problem"}}
    return {**_PROBLEMS[status], "content": {"application/problem+json": problem}}
