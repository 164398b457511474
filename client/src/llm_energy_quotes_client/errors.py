"""Errors the client raises: the service's RFC 9457 problem details as typed exceptions, one class
per status a caller branches on, and transport failures (timeouts, refused connections)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from llm_energy_quotes_client.retry_after import retry_after_s


class QuotesClientError(Exception):
    """Base of everything this client raises."""


class QuotesTransportError(QuotesClientError):
    """The service could not be reached or did not answer in time (httpx's error is the cause)."""


class QuotesTimeout(QuotesTransportError):
    """No answer within the client's timeout."""


@dataclass(frozen=True)
class FieldProblem:
    """One entry of a validation problem's `errors`: where (`loc`, a dotted path) and what."""

    loc: str
    msg: str


class ApiProblem(QuotesClientError):
    """An error answer of the service, with its problem details (RFC 9457).

    `type` is the URI to branch on (`.../problems/unknown-name`, `.../idempotency-mismatch`);
    `errors` lists the offending fields of a validation problem; `extra` holds the type's own
    members (`suggestions`, `required_gpu_count`...); `headers` are the response's headers."""

    status_code: int = 0  # the subclass's status; 0 on this base class (any other status)

    def __init__(
        self,
        *,
        status: int,
        type: str,
        title: str,
        detail: str,
        errors: tuple[FieldProblem, ...] = (),
        extra: dict[str, Any] | None = None,
        headers: httpx.Headers | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = errors
        self.extra = extra or {}
        self.headers = headers or httpx.Headers()


class BadRequest(ApiProblem):
    status_code = 400


class Unauthorized(ApiProblem):
    """No key, an unknown key or a revoked one."""

    status_code = 401


class Forbidden(ApiProblem):
    """The key lacks the endpoint's scope."""

    status_code = 403


class NotFound(ApiProblem):
    """No such entry, or another tenant's (the service does not tell them apart)."""

    status_code = 404


class Conflict(ApiProblem):
    """The same Idempotency-Key is still being priced, or a concurrent write won."""

    status_code = 409


class PayloadTooLarge(ApiProblem):
    status_code = 413


class InvalidRequest(ApiProblem):
    """A body or parameter the service refused (`errors` names the fields), an unknown model
    or GPU (`extra["suggestions"]`), or an Idempotency-Key reused with another body."""

    status_code = 422


class _RetryableProblem(ApiProblem):
    @property
    def retry_after_s(self) -> float | None:
        """The answer's `Retry-After` [s] (delta-seconds or an HTTP date); None when absent."""
        return retry_after_s(self.headers.get("Retry-After"))


class RateLimited(_RetryableProblem):
    """The key's rate limit for this scope is spent; `retry_after_s` says when to try again."""

    status_code = 429


class ServiceUnavailable(_RetryableProblem):
    """The database is away for a write or read that needs it, or the worker sheds load."""

    status_code = 503


PROBLEM_CLASSES: dict[int, type[ApiProblem]] = {
    cls.status_code: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        InvalidRequest,
        RateLimited,
        ServiceUnavailable,
    )
}


def problem_from_body(status: int, body: Any, headers: httpx.Headers | None = None) -> ApiProblem:
    """The exception for a problem document (a batch item's, or an error answer's body); a body
    that is not one (a proxy's HTML page) still gives the status's class, with a generic title."""
    document: dict[str, Any] = body if isinstance(body, dict) else {}
    known = {"type", "title", "status", "detail", "errors"}
    raw_errors = document.get("errors") or []
    errors = tuple(
        FieldProblem(loc=str(e.get("loc", "")), msg=str(e.get("msg", "")))
        for e in raw_errors
        if isinstance(e, dict)
    )
    cls = PROBLEM_CLASSES.get(status, ApiProblem)
    return cls(
        status=status,
        type=str(document.get("type", "about:blank")),
        title=str(document.get("title", f"HTTP {status}")),
        detail=str(document.get("detail", "")),
        errors=errors,
        extra={k: v for k, v in document.items() if k not in known},
        headers=headers,
    )


def problem_from_response(response: httpx.Response) -> ApiProblem:
    """The exception for an error answer (status >= 400)."""
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text[:500]}
    return problem_from_body(response.status_code, body, response.headers)
