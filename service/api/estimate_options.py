"""The estimate routes' caller and options (`?verbose`, the `Idempotency-Key` header), declared
to FastAPI but solved by the routes themselves: the caller from what admission left in the
request state, the options parsed by FastAPI only when a request sends one.

A query or header parameter declared on a route is solved on every request, sent or not:
FastAPI looks into the field's type, finds its alias and copies its default each time, which
costs an estimate about as much as validating its body. Most estimates send neither option.
So the routes declare them here, as FastAPI parameters of a signature that is never called,
and read them with FastAPI's own parameter parsing (`request_params_to_args`: the same
conversion, constraints and error locations as a declared parameter) when the request has a
query string or the header; a bad value raises the RequestValidationError FastAPI would have.
(They are read once the body is valid: a request with a bad body is told about its body first.)
The OpenAPI document lists them as FastAPI lists a route's own parameters.

The caller (`RequireScope`) is declared in the same never-called signature: as a dependency of
the route, FastAPI would solve it as a sub-dependency on every estimate (a second pass over the
request's parameters, cache keys and callable checks) only to take the principal the admission
middleware already found. The route asks for it itself (`caller`), the OpenAPI document lists
its security as FastAPI would, and `service.api.access` reads its scope from this declaration.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant, request_params_to_args
from fastapi.exceptions import RequestValidationError

from service.api.deps import EstimateCaller, IdempotencyKeyHeader, RequireScope
from service.api.keys import Principal

Verbose = Annotated[
    bool, Query(description="Fill `breakdown` with the per-kernel table and defaulted inputs.")
]
_KEY_HEADER = b"idempotency-key"


async def _estimate_options(
    caller: EstimateCaller, idempotency_key: IdempotencyKeyHeader = None, verbose: Verbose = False
) -> None:
    """The caller and options of POST /v1/estimate (declared, never called)."""


async def _batch_options(caller: EstimateCaller, verbose: Verbose = False) -> None:
    """The caller and options of POST /v1/estimate/batch (declared, never called)."""


class EstimateOptions:
    """One route's caller and options: their FastAPI declaration and their OpenAPI parameters
    and security."""

    def __init__(self, path: str, declared: Any) -> None:
        self.path = path
        self.dependant: Dependant = get_dependant(path=path, call=declared)
        self.reads_key = bool(self.dependant.header_params)
        (self.require,) = (
            sub.call for sub in self.dependant.dependencies if isinstance(sub.call, RequireScope)
        )
        probe = FastAPI()  # as FastAPI documents a route that declares them
        probe.post(path)(declared)
        operation = probe.openapi()["paths"][path]["post"]
        self.openapi_extra: dict[str, Any] = {
            "parameters": operation["parameters"],
            "security": operation["security"],
        }

    async def caller(self, request: Request) -> Principal:
        """The caller, as the route's `RequireScope` dependency would answer it: the principal
        admission found for this scope, else the key checked here."""
        return await self.require(request)

    def read(self, request: Request) -> tuple[str | None, bool]:
        """(Idempotency-Key, verbose) of `request`; (None, False) when it sends neither."""
        scope = request.scope
        if not scope["query_string"] and not (
            self.reads_key and any(name == _KEY_HEADER for name, _ in scope["headers"])
        ):
            return None, False
        query, query_errors = request_params_to_args(
            self.dependant.query_params, request.query_params
        )
        header, header_errors = request_params_to_args(
            self.dependant.header_params, request.headers
        )
        if query_errors or header_errors:
            raise RequestValidationError([*query_errors, *header_errors])
        return header.get("idempotency_key"), bool(query["verbose"])


ESTIMATE_OPTIONS = EstimateOptions("/v1/estimate", _estimate_options)
BATCH_OPTIONS = EstimateOptions("/v1/estimate/batch", _batch_options)
DECLARED_BY_PATH = {
    options.path: options.dependant for options in (ESTIMATE_OPTIONS, BATCH_OPTIONS)
}
"""The routes whose caller is declared here rather than in their signature, by path."""
