"""The route x scope matrix, generated from `app.routes`: every route declares a scope or is
public (a new route declaring neither fails here), and for every keyed route: no key or an
unknown key -> 401, a key of the right tenant without the scope -> 403, another tenant's
object -> 404, all as RFC 9457 problems. Tenant A owns a quote, an observation and a
calibration; tenant B holds an admin key (every scope)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi import FastAPI
from fastapi.routing import RouteContext
from fastapi.testclient import TestClient
from httpx import Response

from service.api.access import PUBLIC, app_routes, route_access
from service.api.keys import SCOPES

OBSERVATION = {"gpu_j": 790.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:05Z"}
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/estimate"): example_body(),
    ("POST", "/v1/estimate/batch"): {"items": [example_body()]},
    ("POST", "/v1/quotes/{quote_id}/observations"): OBSERVATION,
    ("POST", "/v1/calibrations"): {},
    ("POST", "/v1/calibrations/rollback"): {},
}
# A key holding none of the route's scope (nor admin, which grants every scope).
WITHOUT = {
    "estimate": "billing,observe",
    "billing": "estimate,observe",
    "observe": "estimate,billing",
    "admin": "estimate,billing,observe",
}
UNKNOWN_KEY = "lq_0123456789ab_" + "x" * 43  # our format, never issued


@dataclass
class World:
    client: TestClient
    app: FastAPI
    keys_a: dict[str, str]  # scope -> tenant A key with that scope only
    without_a: dict[str, str]  # scope -> tenant A key lacking it
    admin_b: str
    ids_a: dict[str, str]  # path parameter -> tenant A's object, or a catalogue id


@pytest.fixture(scope="module")
def world(database_url: str) -> Iterator[World]:
    keys_a = {scope: create_key(database_url, "tenant-a", scope) for scope in SCOPES}
    without_a = {s: create_key(database_url, "tenant-a", w) for s, w in WITHOUT.items()}
    admin_b = create_key(database_url, "tenant-b", "admin")
    with running_client(database_url) as client:
        quote = client.post("/v1/estimate", json=example_body(), headers=bearer(keys_a["estimate"]))
        quote_id = quote.json()["quote_id"]
        observed = client.post(
            f"/v1/quotes/{quote_id}/observations",
            json=OBSERVATION,
            headers=bearer(keys_a["observe"]),
        )
        assert observed.status_code == 201, observed.text
        calibration = client.post("/v1/calibrations", json={}, headers=bearer(keys_a["admin"]))
        assert calibration.status_code == 201, calibration.text
        ids = {
            "quote_id": quote_id,
            "calibration_id": calibration.json()["calibration_id"],
            "gpu_id": "H100-SXM5-80GB",
            "model_id": "meta-llama/Llama-3.1-8B-Instruct",
            "name": "favicon.png",  # a docs asset
        }
        yield World(client, client.app, keys_a, without_a, admin_b, ids)  # type: ignore[arg-type]


def endpoints(app: FastAPI) -> list[tuple[str, str, RouteContext]]:
    """(method, path template, route) for every method of every HTTP route of the app."""
    found = []
    for route in app_routes(app):
        assert route.methods, f"not an HTTP route: {route.path}"
        for method in sorted(route.methods - {"HEAD"}):
            found.append((method, str(route.path), route))
    return found


def call(world: World, method: str, template: str, key: str | None) -> Response:
    path = template.replace(":path}", "}").format(**world.ids_a)
    headers = bearer(key) if key else {}
    return world.client.request(method, path, json=BODIES.get((method, template)), headers=headers)


def assert_problem(response: Response, status: int, what: str) -> None:
    assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
    assert response.headers["content-type"].startswith("application/problem+json"), what
    body = response.json()
    assert body["status"] == status and {"type", "title", "detail"} <= set(body), what


def test_every_route_declares_a_scope_or_is_public(world: World) -> None:
    undeclared = [p for _, p, r in endpoints(world.app) if route_access(world.app, r) is None]
    assert undeclared == []
    declared = {route_access(world.app, r) for _, _, r in endpoints(world.app)}
    assert declared == SCOPES | {PUBLIC}


def test_a_route_without_a_declaration_is_caught() -> None:
    app = FastAPI()

    @app.get("/v1/forgotten")
    def forgotten() -> dict[str, str]:
        return {}

    route = next(r for r in app_routes(app) if r.path == "/v1/forgotten")
    assert route_access(app, route) is None


def test_public_routes_answer_without_a_key(world: World) -> None:
    public = [(m, p) for m, p, r in endpoints(world.app) if route_access(world.app, r) == PUBLIC]
    assert len(public) >= 10
    for method, template in public:
        response = call(world, method, template, None)
        assert response.status_code == 200, (template, response.text)


def test_keyed_routes_refuse_no_key_unknown_key_and_wrong_scope(world: World) -> None:
    checked = 0
    for method, template, route in endpoints(world.app):
        scope = route_access(world.app, route)
        if scope == PUBLIC:
            continue
        assert scope is not None
        what = f"{method} {template}"
        assert_problem(call(world, method, template, None), 401, f"{what} without a key")
        assert_problem(call(world, method, template, UNKNOWN_KEY), 401, f"{what} unknown key")
        wrong = call(world, method, template, world.without_a[scope])
        assert_problem(wrong, 403, f"{what} without `{scope}`")
        assert wrong.headers["RateLimit-Policy"].startswith(f'"{scope}";')
        checked += 1
    assert checked >= 10


def test_another_tenants_objects_are_404_on_every_object_route(world: World) -> None:
    object_routes = [
        (method, template)
        for method, template, route in endpoints(world.app)
        if route_access(world.app, route) != PUBLIC and "{" in template
    ]
    assert len(object_routes) >= 4
    for method, template in object_routes:
        other = call(world, method, template, world.admin_b)
        assert_problem(other, 404, f"{method} {template} as tenant B")
    # listings of tenant B leave tenant A's objects out
    for path, id_name in [("/v1/quotes", "quote_id"), ("/v1/calibrations", "calibration_id")]:
        listed = world.client.get(path, headers=bearer(world.admin_b))
        assert listed.status_code == 200
        assert world.ids_a[id_name] not in listed.text
    # and tenant A still reads its own
    own = call(world, "GET", "/v1/quotes/{quote_id}", world.keys_a["billing"])
    assert own.status_code == 200 and len(own.json()["observations"]) == 1
    own = call(world, "GET", "/v1/calibrations/{calibration_id}", world.keys_a["admin"])
    assert own.status_code == 200 and own.json()["is_current"] is True
