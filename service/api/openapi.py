"""OpenAPI: the problem responses each route declares, served as application/problem+json."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from service.schemas.common import PROBLEM_EXAMPLE, Problem

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
    400: {"description": "The body is not JSON: not UTF-8 text, or not parseable"},
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
    415: {"description": "The body was not sent as JSON (`Content-Type: application/json`)"},
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


_TYPE = "https://llm-energy-quotes.dev/problems/"
# What the service answers with each status (tests/api checks each against a real answer's
# type, title and status).
PROBLEM_EXAMPLES: dict[int | str, dict[str, Any]] = {
    400: {
        "type": _TYPE + "malformed-body",
        "title": "Malformed request body",
        "status": 400,
        "detail": "the body is not valid JSON: Expecting ',' delimiter at line 1, column 42",
    },
    401: {
        "type": _TYPE + "unauthorized",
        "title": "Unauthorized",
        "status": 401,
        "detail": "an API key is required: send `Authorization: Bearer <key>`",
    },
    403: {
        "type": _TYPE + "forbidden",
        "title": "Forbidden",
        "status": 403,
        "detail": "this API key lacks the `billing` scope",
    },
    404: {
        "type": _TYPE + "not-found",
        "title": "Not Found",
        "status": 404,
        "detail": "no quote 'q_01JD2N8Z7Q5V6W4X3Y2Z1A0B9C'",
    },
    409: {
        "type": _TYPE + "conflict",
        "title": "Conflict",
        "status": 409,
        "detail": "a request with this Idempotency-Key is still in flight; retry later",
    },
    415: {
        "type": _TYPE + "unsupported-media-type",
        "title": "Unsupported Media Type",
        "status": 415,
        "detail": "the body must be JSON sent with `Content-Type: application/json` "
        "(`text/plain` sent)",
    },
    413: {
        "type": "about:blank",
        "title": "Request Entity Too Large",
        "status": 413,
        "detail": "request body larger than 2097152 bytes",
    },
    422: PROBLEM_EXAMPLE,
    429: {
        "type": _TYPE + "rate-limited",
        "title": "Too Many Requests",
        "status": 429,
        "detail": "rate limit of 600 `estimate` requests per 60 s reached for this API key; "
        "retry in 12 s",
    },
    503: {
        "type": _TYPE + "database-unavailable",
        "title": "Database unavailable",
        "status": 503,
        "detail": "the database is unavailable; nothing was stored, retry later",
    },
    "default": {
        "type": _TYPE + "internal",
        "title": "Internal Server Error",
        "status": 500,
        "detail": "an unexpected error occurred; it has been logged",
    },
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route answering `codes` (and, like every route, 500) as problems,
    each with an example of what the service answers with that status."""
    responses: dict[int | str, dict[str, Any]] = {
        code: {"model": Problem, **_PROBLEMS[code], **_example(code)} for code in codes
    }
    responses["default"] = {
        "model": Problem,
        "description": "Unexpected error (500)",
        **_example("default"),
    }
    return responses


def _example(code: int | str) -> dict[str, Any]:
    return {"content": {"application/json": {"example": PROBLEM_EXAMPLES[code]}}}


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
                    operation["responses"].setdefault("415", _problem_response(415))
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
    problem = {
        "schema": {"$ref": "#/components/schemas/Problem"},
        "example": PROBLEM_EXAMPLES[status],
    }
    return {**_PROBLEMS[status], "content": {"application/problem+json": problem}}
