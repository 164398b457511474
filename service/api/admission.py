"""The caller is checked from the request's headers alone, before its body is read and before
it takes a load-shedding slot: a client without a valid key, or without the route's scope, is
answered 401/403 at once and holds nothing, however slowly it sends its body.

The route's scope is read off the app's routes (`service.api.access`, the same declarations the
route-access test walks); the principal found here is left in the request state, where the
route's `RequireScope` (a dependency, or asked for by the estimate routes themselves:
service/api/estimate_options.py) takes it without checking the key again.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import RouteContext
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.access import PUBLIC, app_routes, route_access
from service.api.deps import PRINCIPAL_STATE_KEY, admitted_principal
from service.api.problems import problem_response
from service.errors import ServiceError


class RouteScopes:
    """The scope each of the app's routes requires, read once (routes are fixed at start-up)."""

    def __init__(self, app: FastAPI) -> None:
        self._routes: list[tuple[RouteContext, str | None]] = [
            (route, route_access(app, route)) for route in app_routes(app)
        ]
        # (method, root path, path) -> scope, for requests that matched a route without path
        # parameters: as many keys as such routes and their methods, and the estimate's among
        # them, which would otherwise be matched against every route before the router does.
        self._static: dict[tuple[str, str, str], str | None] = {}

    def required(self, scope: Scope) -> str | None:
        """The scope the request's route requires; None for a public route or no route (the
        app answers those: a catalogue, a 404 or a 405)."""
        key = (scope["method"], scope.get("root_path", ""), scope["path"])
        try:
            return self._static[key]
        except KeyError:
            pass
        for route, access in self._routes:
            match, _ = route.matches(scope)
            if match == Match.FULL:
                required = None if access == PUBLIC else access
                if route.path is not None and "{" not in route.path:
                    self._static[key] = required
                return required
        return None


class AdmissionMiddleware:
    """Authenticates the caller and checks the route's scope from the headers (see module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._scopes: RouteScopes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._scopes is None:
            self._scopes = RouteScopes(scope["app"])
        required = self._scopes.required(scope)
        if required is not None:
            try:
                principal = await admitted_principal(scope, required)
            except ServiceError as error:
                await problem_response(error)(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL_STATE_KEY] = principal
        await self.app(scope, receive, send)
