"""API keys, scopes and tenants; the billing pull; observations (keys configured)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api_support import (
    bearer,
    create_key,
    example_body,
    make_settings,
    running_client,
    services_of,
    take_database_away,
)
from fastapi.testclient import TestClient

from service.api.keys import key_prefix
from service.db.base import utc_now
from service.db.engine import Database
from service.db.repositories import ApiKeyRepository


@pytest.fixture(scope="module")
def keys(database_url: str) -> dict[str, str]:
    return {
        "acme": create_key(database_url, "acme", "estimate,billing,observe"),
        "acme_gateway": create_key(database_url, "acme", "estimate"),
        "globex": create_key(database_url, "globex", "estimate,billing,observe"),
        "revoked": create_key(database_url, "acme", "admin"),
    }


@pytest.fixture(scope="module")
def client(database_url: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


def quote(client: TestClient, key: str, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/estimate", json=example_body(**overrides), headers=bearer(key))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_keys_are_required_once_any_exists(client: TestClient, keys: dict[str, str]) -> None:
    missing = client.post("/v1/estimate", json=example_body())
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"].startswith("Bearer")
    forged = keys["acme"][:-4] + "AAAA"
    assert (
        client.post("/v1/estimate", json=example_body(), headers=bearer(forged)).status_code == 401
    )
    assert client.get("/v1/quotes", headers=bearer("not-a-key")).status_code == 401
    health = client.get("/v1/health").json()
    assert health["open_dev_mode"] is False and health["auth_mode"] == "api-key"
    assert client.get("/v1/gpus").status_code == 200  # catalogues stay public


def test_scopes_are_enforced(client: TestClient, keys: dict[str, str]) -> None:
    created = quote(client, keys["acme_gateway"])
    response = client.get(f"/v1/quotes/{created['quote_id']}", headers=bearer(keys["acme_gateway"]))
    assert response.status_code == 403
    assert response.headers["content-type"].startswith("application/problem+json")


def test_revoked_key_is_refused(
    client: TestClient, keys: dict[str, str], database_url: str
) -> None:
    assert quote(client, keys["revoked"])["quote_id"]
    database = Database(make_settings(database_url))
    with database.sessions.begin() as session:
        row = ApiKeyRepository(session).by_prefix(key_prefix(keys["revoked"]) or "")
        assert row is not None
        row.revoked_at = utc_now()
    database.dispose()
    refused = client.post("/v1/estimate", json=example_body(), headers=bearer(keys["revoked"]))
    assert refused.status_code == 401


def test_a_cached_key_is_revoked_everywhere_within_the_cache_time(database_url: str) -> None:
    """The key store's clock is the test's: the cache's age is what the test sets, not how long
    the requests happened to take, so both assertions always run."""
    key = create_key(database_url, "acme", "estimate")
    cache_s = 0.5
    now_s = [1000.0]
    with running_client(database_url, api_key_cache_s=cache_s) as cached_client:
        services_of(cached_client).keys.clock = lambda: now_s[0]
        assert quote(cached_client, key)["quote_id"]  # read from the database at 1000.0 s
        database = Database(make_settings(database_url))
        with database.sessions.begin() as session:
            row = ApiKeyRepository(session).by_prefix(key_prefix(key) or "")
            assert row is not None
            row.revoked_at = utc_now()
        database.dispose()
        # Within the cache time the worker still trusts what it read (no database read)...
        now_s[0] = 1000.0 + cache_s - 0.01
        still = cached_client.post("/v1/estimate", json=example_body(), headers=bearer(key))
        assert still.status_code == 200, still.text
        # ...and once it has passed, the key is refused.
        now_s[0] = 1000.0 + cache_s
        refused = cached_client.post("/v1/estimate", json=example_body(), headers=bearer(key))
        assert refused.status_code == 401, refused.text


def test_a_tenant_cannot_see_another_tenants_quote(
    client: TestClient, keys: dict[str, str]
) -> None:
    created = quote(client, keys["acme"])
    own = client.get(f"/v1/quotes/{created['quote_id']}", headers=bearer(keys["acme"]))
    assert own.status_code == 200
    assert own.json()["response"]["energy"] == created["energy"]
    other = client.get(f"/v1/quotes/{created['quote_id']}", headers=bearer(keys["globex"]))
    assert other.status_code == 404
    listed = client.get("/v1/quotes", headers=bearer(keys["globex"]), params={"limit": 1000})
    assert created["quote_id"] not in {q["quote_id"] for q in listed.json()["items"]}
    observe = client.post(
        f"/v1/quotes/{created['quote_id']}/observations",
        json={"gpu_j": 1.0, "measured_with": "nvml", "measured_at": "2026-11-22T10:00:00Z"},
        headers=bearer(keys["globex"]),
    )
    assert observe.status_code == 404
    csv_listing = client.get(
        "/v1/quotes", params={"format": "csv", "limit": 1000}, headers=bearer(keys["globex"])
    )
    assert csv_listing.status_code == 200 and created["quote_id"] not in csv_listing.text
    # Another tenant's quote is indistinguishable from one that does not exist.
    unknown = client.get("/v1/quotes/q_00000000000000000000000000", headers=bearer(keys["globex"]))
    assert other.json()["title"] == unknown.json()["title"] == observe.json()["title"]
    assert other.headers["content-type"].startswith("application/problem+json")
    detail = client.get(f"/v1/quotes/{created['quote_id']}", headers=bearer(keys["acme"])).json()
    assert detail["observations"] == [], "the refused observation was stored"


def test_idempotency_keys_are_scoped_to_the_tenant(
    client: TestClient, keys: dict[str, str]
) -> None:
    headers = {"Idempotency-Key": "shared"}
    acme = client.post(
        "/v1/estimate", json=example_body(), headers={**headers, **bearer(keys["acme"])}
    ).json()
    globex = client.post(
        "/v1/estimate",
        json=example_body(hardware={"gpu": "L4"}),
        headers={**headers, **bearer(keys["globex"])},
    )
    assert globex.status_code == 200
    assert globex.json()["quote_id"] != acme["quote_id"]


def read_all_pages(
    client: TestClient, key: str, params: dict[str, Any], between: Any = None
) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page_params = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/quotes", params=page_params, headers=bearer(key)).json()
        ids.extend(q["quote_id"] for q in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return ids
        if between is not None:
            between()


def test_pagination_is_stable_while_quotes_are_inserted(
    client: TestClient, keys: dict[str, str]
) -> None:
    start = datetime.now(UTC) - timedelta(milliseconds=1)
    first = [quote(client, keys["acme"])["quote_id"] for _ in range(5)]
    inserted: list[str] = []

    def insert_two() -> None:
        if len(inserted) < 6:  # three rounds of inserts between page reads
            inserted.extend(quote(client, keys["acme"])["quote_id"] for _ in range(2))

    ids = read_all_pages(
        client, keys["acme"], {"limit": 2, "created_after": start.isoformat()}, insert_two
    )
    assert len(ids) == len(set(ids)), "a row was repeated"
    assert set(first + inserted) == set(ids), "a row was skipped"
    assert ids[:5] == first
    stamps = [
        client.get(f"/v1/quotes/{i}", headers=bearer(keys["acme"])).json()["created_at"]
        for i in ids
    ]
    assert stamps == sorted(stamps)
    before = read_all_pages(
        client,
        keys["acme"],
        {"limit": 3, "created_after": start.isoformat(), "created_before": stamps[3]},
    )
    assert before == ids[:3]


def test_csv_format(client: TestClient, keys: dict[str, str]) -> None:
    created = quote(client, keys["globex"], metadata={"customer": "initech"})
    response = client.get(
        "/v1/quotes", params={"format": "csv", "limit": 1000}, headers=bearer(keys["globex"])
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    row = next(r for r in rows if r["quote_id"] == created["quote_id"])
    assert float(row["gpu_j"]) == pytest.approx(created["energy"]["gpu_j"], rel=1e-12)
    assert "initech" in row["metadata"]


def test_bad_cursor_and_limits_are_422(client: TestClient, keys: dict[str, str]) -> None:
    for params in ({"cursor": "garbage"}, {"limit": 0}, {"created_after": "2026-01-01T00:00:00"}):
        response = client.get("/v1/quotes", params=params, headers=bearer(keys["acme"]))
        assert response.status_code == 422, params


def test_observations_are_stored_once_per_key(client: TestClient, keys: dict[str, str]) -> None:
    created = quote(client, keys["acme"])
    url = f"/v1/quotes/{created['quote_id']}/observations"
    body = {
        "gpu_j": 790.0,
        "total_s": 3.5,
        "measured_with": "nvml",
        "measured_at": "2026-11-22T10:00:05Z",
    }
    headers = {**bearer(keys["acme"]), "Idempotency-Key": "obs-1"}
    first = client.post(url, json=body, headers=headers)
    again = client.post(url, json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["observation_id"] == again.json()["observation_id"]
    changed = client.post(url, json={**body, "gpu_j": 800.0}, headers=headers)
    assert changed.status_code == 422
    detail = client.get(f"/v1/quotes/{created['quote_id']}", headers=bearer(keys["acme"])).json()
    assert [o["gpu_j"] for o in detail["observations"]] == [790.0]
    naive = client.post(
        url, json={**body, "measured_at": "2026-11-22T10:00:05"}, headers=bearer(keys["acme"])
    )
    assert naive.status_code == 422
    missing = client.post("/v1/quotes/q_nope/observations", json=body, headers=bearer(keys["acme"]))
    assert missing.status_code == 404


def test_known_keys_still_estimate_while_the_database_is_away(
    database_url: str, keys: dict[str, str]
) -> None:
    with running_client(database_url) as fresh:
        assert quote(fresh, keys["acme"])["quote_id"]
        take_database_away(fresh)
        body = quote(fresh, keys["acme"])
        assert body["quote_id"] is None
        unknown = fresh.post("/v1/estimate", json=example_body(), headers=bearer(keys["globex"]))
        assert unknown.status_code == 401
