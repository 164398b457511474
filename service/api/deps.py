"""Dependencies: the app's long-lived objects, the request's session, and the caller."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy.orm import Session
from starlette.types import Scope

from service.api.keys import DEV_PRINCIPAL, NEEDS_DATABASE, KeyStore, Principal
from service.api.rate_limit import STATE_KEY, LeaseNeeded, RateLimiter
from service.config import Settings
from service.db.engine import Database
from service.errors import Forbidden, Unauthorized
from service.metrics import Metrics
from service.pricing.estimator import Estimator
from service.quotes.calibration_registry import CalibrationRegistry
from service.quotes.service import QuoteService


@dataclass(slots=True)
class AppServices:
    """Built once per app in the lifespan; tests may replace any of them."""

    settings: Settings
    database: Database
    estimator: Estimator
    keys: KeyStore
    quotes: QuoteService
    metrics: Metrics
    calibrations: CalibrationRegistry


# Dependencies that only read memory are `async def`: FastAPI runs a sync dependency in the
# thread pool, a hop that costs more than the work on the estimate's hot path.


def app_services(request: Request) -> AppServices:
    """The app's services, built once by the lifespan (service/main.py)."""
    services: AppServices = request.app.state.services
    return services


async def get_services(request: Request) -> AppServices:
    return app_services(request)


ServicesDep = Annotated[AppServices, Depends(get_services)]


async def get_estimator(services: ServicesDep) -> Estimator:
    return services.estimator


def quote_service(request: Request) -> QuoteService:
    """The app's quote service, read by the estimate route itself: a dependency for it would
    be one more for FastAPI to solve on every estimate."""
    return app_services(request).quotes


def get_session(services: ServicesDep) -> Iterator[Session]:
    """The request's unit of work: commits when the route returns, rolls back if it raises.

    Scoped to the route function so that a failed commit still turns into the response.
    """
    session = services.database.sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
EstimatorDep = Annotated[Estimator, Depends(get_estimator)]
IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",  # printable ASCII, no spaces: a UUID or similar token
        description="A client token (printable ASCII, at most 200 characters); see API.md.",
    ),
]

PRINCIPAL_STATE_KEY = "principal"  # where the admission middleware leaves the caller

BEARER_SCHEME_NAME = "HTTPBearer"
BEARER_DESCRIPTION = "API key: `Authorization: Bearer <key>`"
bearer_scheme = HTTPBearer(
    auto_error=False, scheme_name=BEARER_SCHEME_NAME, description=BEARER_DESCRIPTION
)


async def known_principal(keys: KeyStore, token: str | None) -> Principal | None:
    """The tenant behind the bearer `token`, or without one the dev tenant while no key is
    configured at all; None when refused. Answered from the key store's cache when it is
    fresh; only a database read goes to the thread pool."""
    if token is None:
        open_mode = keys.cached_open_mode()
        if open_mode is NEEDS_DATABASE:
            open_mode = await keys.open_mode_read()
        return DEV_PRINCIPAL if open_mode else None
    principal = keys.cached_authenticate(token)
    if principal is NEEDS_DATABASE:
        principal = await run_in_threadpool(keys.authenticate, token)
    return principal if isinstance(principal, Principal) else None


async def authenticated(keys: KeyStore, token: str | None) -> Principal:
    """The caller behind the bearer `token` (see known_principal); Unauthorized when none."""
    principal = await known_principal(keys, token)
    if principal is not None:
        return principal
    if token is None:
        raise Unauthorized(
            "an API key is required: send `Authorization: Bearer <key>`",
            headers={"WWW-Authenticate": "Bearer"},
        )
    raise Unauthorized(
        "the API key is unknown or revoked",
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )


def bearer_token(scope: Scope) -> str | None:
    """The token of the request's `Authorization: Bearer <token>` header, as HTTPBearer reads
    it (any other scheme, or none: None)."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, token = get_authorization_scheme_param(value.decode("latin-1"))
            return token if kind.lower() == "bearer" and token else None
    return None


async def admitted_principal(scope: Scope, required: str) -> Principal:
    """The caller, counted against its rate limit for `required` and holding that scope;
    Unauthorized, RateLimited or Forbidden otherwise. Called by the admission middleware from
    the headers alone, before the body is read (service/api/admission.py)."""
    services: AppServices = scope["app"].state.services
    principal = await authenticated(services.keys, bearer_token(scope))
    await count_request(scope, principal, required)
    if not principal.allows(required):
        raise Forbidden(f"this API key lacks the `{required}` scope")
    return principal


async def optional_principal(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal | None:
    """The caller of a public route, when it sends a known key (or in open dev mode): public
    catalogues answer everyone, and add a known tenant's own entries."""
    token = credentials.credentials if credentials is not None else None
    return await known_principal(services.keys, token)


OptionalCaller = Annotated[Principal | None, Depends(optional_principal)]


async def count_request(scope: Scope, principal: Principal, policy: str) -> None:
    """Count one request of `principal` against its rate limit under `policy`, leaving the
    Decision in the request state for the RateLimit headers; RateLimited when refused. A lease
    from the shared counters is a database call, made from the thread pool."""
    limiter: RateLimiter | None = getattr(scope["app"].state, "rate_limiter", None)
    if limiter is None:
        return
    key = principal.key_prefix or principal.tenant
    decision = limiter.check_from_memory(key, policy)
    if isinstance(decision, LeaseNeeded):
        decision = await run_in_threadpool(limiter.check, key, policy)
    if decision is not None:
        scope.setdefault("state", {})[STATE_KEY] = decision
        if not decision.allowed:
            raise decision.refusal()


class RequireScope(HTTPBearer):
    """The dependency that declares a route's `scope` (read by the admission middleware, which
    checks and counts the key from the headers) and returns the admitted caller; without the
    middleware it admits a key holding `scope` itself and counts it against the key's rate
    limit for that scope (before the scope check: a refused key is still counted and told).

    It is the bearer scheme itself (declared in the OpenAPI document as `bearer_scheme` is),
    not a dependency on it: a dependency with no sub-dependency of its own is one solve fewer
    on every keyed request."""

    def __init__(self, scope: str) -> None:
        super().__init__(
            auto_error=False, scheme_name=BEARER_SCHEME_NAME, description=BEARER_DESCRIPTION
        )
        self.scope = scope

    async def __call__(self, request: Request) -> Principal:  # type: ignore[override]
        admitted = request.scope.get("state", {}).get(PRINCIPAL_STATE_KEY)
        if isinstance(admitted, Principal):
            return admitted  # admitted for this scope, and counted, by the middleware
        # No admission middleware ran (an app assembled without it): check the key here.
        principal = await authenticated(app_services(request).keys, bearer_token(request.scope))
        await count_request(request.scope, principal, self.scope)
        if not principal.allows(self.scope):
            raise Forbidden(f"this API key lacks the `{self.scope}` scope")
        return principal


async def public_route() -> None:
    """Marks a router's routes as public (no key, no rate limit): see `service.api.access`."""


EstimateCaller = Annotated[Principal, Depends(RequireScope("estimate"))]
BillingCaller = Annotated[Principal, Depends(RequireScope("billing"))]
ObserveCaller = Annotated[Principal, Depends(RequireScope("observe"))]
AdminCaller = Annotated[Principal, Depends(RequireScope("admin"))]
