"""The web layer's error hierarchy; one handler turns each into an RFC 9457 problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One invalid input: `loc` is a dotted path into the request (e.g. ``workload.batch_size``)."""

    loc: str
    msg: str


class ServiceError(Exception):
    """Base of every error the service answers with a problem document."""

    status: int = 500
    title: str = "Internal Server Error"
    type_slug: str = "internal"

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = tuple(errors)
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


class InvalidRequest(ServiceError):
    status, title, type_slug = 422, "Invalid request", "validation"


class UnknownName(InvalidRequest):
    """A model, GPU or region not in the catalogue; `extra['suggestions']` holds near matches."""

    title, type_slug = "Unknown catalogue entry", "unknown-name"


class IdempotencyMismatch(InvalidRequest):
    title, type_slug = "Idempotency-Key reused with a different request", "idempotency-mismatch"


class Unauthorized(ServiceError):
    status, title, type_slug = 401, "Unauthorized", "unauthorized"


class Forbidden(ServiceError):
    status, title, type_slug = 403, "Forbidden", "forbidden"


class NotFound(ServiceError):
    status, title, type_slug = 404, "Not Found", "not-found"


class Conflict(ServiceError):
    status, title, type_slug = 409, "Conflict", "conflict"


class MalformedBody(ServiceError):
    """A body that is not JSON at all (not UTF-8, or not parseable): 400, not a field's 422."""

    status, title, type_slug = 400, "Malformed request body", "malformed-body"


class UnsupportedMediaType(ServiceError):
    status, title, type_slug = 415, "Unsupported Media Type", "unsupported-media-type"


class PayloadTooLarge(ServiceError):
    status, title, type_slug = 413, "Payload Too Large", "payload-too-large"


class DatabaseUnavailable(ServiceError):
    status, title, type_slug = 503, "Database unavailable", "database-unavailable"
