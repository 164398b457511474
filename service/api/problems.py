"""The one place errors become RFC 9457 problem documents (application/problem+json)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import Match

from service.api.deps import app_services
from service.errors import (
    Conflict,
    DatabaseUnavailable,
    FieldError,
    InvalidRequest,
    MalformedBody,
    ServiceError,
    UnsupportedMediaType,
)
from service.schemas.estimate_request import ARCHITECTURE_FORMS

logger = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://llm-energy-quotes.dev/problems/"


def loc_path(loc: Sequence[int | str]) -> str:
    """Pydantic's loc tuple as a dotted path into the body ('body.' dropped, and the tag of
    the `architecture` form pydantic adds after it)."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    for i in range(len(parts) - 1):
        if parts[i] == "architecture" and parts[i + 1] in ARCHITECTURE_FORMS:
            del parts[i + 1]
            break
    return ".".join(str(part) for part in parts) or "body"


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> InvalidRequest:
    fields = [FieldError(loc_path(e["loc"]), str(e["msg"])) for e in errors]
    detail = "; ".join(f"{f.loc}: {f.msg}" for f in fields[:5]) or "invalid request"
    return InvalidRequest(detail, errors=fields)


def validation_problem(error: ValidationError) -> InvalidRequest:
    return invalid_request(error.errors(include_url=False, include_context=False))


def problem_body(error: ServiceError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": TYPE_BASE + error.type_slug,
        "title": error.title,
        "status": error.status,
        "detail": error.detail,
    }
    if error.errors:
        body["errors"] = [{"loc": e.loc, "msg": e.msg} for e in error.errors]
    body.update(error.extra)
    return body


def problem_response(error: ServiceError) -> JSONResponse:
    return JSONResponse(
        problem_body(error),
        status_code=error.status,
        headers=error.headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


def http_problem(
    status: int, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A plain HTTP error (404 route, 405, 413) as a problem of type about:blank."""
    phrase = HTTPStatus(status).phrase
    body = {"type": "about:blank", "title": phrase, "status": status, "detail": detail}
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


def allowed_methods(request: Request) -> str:
    """The `Allow` header: the methods of every route with the path template of the first
    route matching this path (Starlette's own 405 names only that one route's methods)."""
    methods: set[str] = set()
    template = None
    for route in iter_route_contexts(request.app.router.routes):
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and template in (None, route.path):
            template = route.path
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


JSON_MEDIA_TYPES = ("application/json", "application/problem+json")


def body_problem(request: Request, errors: Sequence[Mapping[str, Any]]) -> ServiceError | None:
    """What is wrong with the body as a whole, rather than with its fields: a body not sent as
    JSON (415), or JSON that does not parse (400); None when the fields are the problem."""
    if not any(error["loc"] and error["loc"][0] == "body" for error in errors):
        return None
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in JSON_MEDIA_TYPES and not media_type.endswith("+json"):
        sent = f"`{media_type}`" if media_type else "no Content-Type"
        return UnsupportedMediaType(
            f"the body must be JSON sent with `Content-Type: application/json` ({sent} sent)"
        )
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "not valid JSON")
            at = error["loc"][1] if len(error["loc"]) > 1 else None
            where = f" at character {at}" if isinstance(at, int) else ""
            return MalformedBody(f"the body is not valid JSON: {reason}{where}")
    return None


def install_problem_handlers(app: FastAPI) -> None:
    """Register the handlers; none leaks a stack trace to the client."""

    async def on_service_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        return problem_response(exc)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return problem_response(
            body_problem(request, exc.errors()) or invalid_request(exc.errors())
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return http_problem(exc.status_code, str(exc.detail), headers)

    async def on_database_down(request: Request, exc: Exception) -> JSONResponse:
        logger.warning("database unavailable on %s: %s", request.url.path, exc)
        services = app_services(request)
        services.metrics.db_errors.labels(operation="request").inc()
        retry_after = str(services.settings.retry_after_s)
        return problem_response(
            DatabaseUnavailable(
                "the database is unavailable; nothing was stored, retry later",
                headers={"Retry-After": retry_after},
            )
        )

    async def on_integrity(_: Request, exc: Exception) -> JSONResponse:
        logger.info("integrity conflict: %s", exc)
        return problem_response(Conflict("a concurrent request stored the same entry; retry"))

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s", request.url.path, exc_info=exc)
        return problem_response(ServiceError("an unexpected error occurred; it has been logged"))

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    for db_error in (OperationalError, InterfaceError, PoolTimeout):
        app.add_exception_handler(db_error, on_database_down)
    app.add_exception_handler(IntegrityError, on_integrity)
    app.add_exception_handler(Exception, on_unexpected)
