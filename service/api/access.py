"""Who may call each route: a scope (`RequireScope`) or public (`public_route`), read off the
app's routes (and, for the estimate routes, off the caller they declare beside their signature:
service/api/estimate_options.py) so that a route added without either is caught
(tests/api/test_route_access.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts

from service.api.deps import RequireScope, public_route
from service.api.estimate_options import DECLARED_BY_PATH

PUBLIC = "public"


def _declared(dependant: Dependant) -> set[str]:
    found: set[str] = set()
    call = dependant.call
    if isinstance(call, RequireScope):
        found.add(call.scope)
    elif call is public_route:
        found.add(PUBLIC)
    for sub in dependant.dependencies:
        found |= _declared(sub)
    return found


def framework_paths(app: FastAPI) -> set[str]:
    """The OpenAPI document and the docs pages FastAPI serves itself: public."""
    paths = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return {path for path in paths if path}


def app_routes(app: FastAPI) -> list[RouteContext]:
    """Every route the app serves, those of included routers too, with their full paths."""
    return list(iter_route_contexts(app.routes))


def route_access(app: FastAPI, route: RouteContext) -> str | None:
    """`public`, the one scope the route requires, or None when it declares neither (or both)."""
    if isinstance(route.original_route, APIRoute):
        declared = _declared(route.dependant)
        beside = DECLARED_BY_PATH.get(route.path or "")  # a caller the route solves itself
        if beside is not None:
            declared |= _declared(beside)
        return declared.pop() if len(declared) == 1 else None
    if route.path in framework_paths(app):
        return PUBLIC
    return None
