"""With the database away, an estimate naming a GPU the catalogue lacks (it may be a registered
one) answers 503, GET /v1/gpus still lists the catalogue with a warning, and a registered GPU a
worker has already read is still priced (registered GPUs are never replaced). Open dev mode."""

from __future__ import annotations

from api_support import bring_database_back, example_body, take_database_away
from fastapi.testclient import TestClient

SPEC = {"id": "dev-accel", "vendor": "AMD", "architecture": "CDNA 3", "tdp_w": 900}


def test_registered_gpus_need_the_database_once(client: TestClient, database_url: str) -> None:
    assert client.post("/v1/gpus", json=SPEC).status_code == 201  # dev mode holds every scope
    hardware = {"gpu": "dev-accel", "count": 1}
    assert client.post("/v1/estimate", json=example_body(hardware=hardware)).status_code == 200
    take_database_away(client)
    try:
        unknown = example_body(hardware={"gpu": "never-registered", "count": 1})
        away = client.post("/v1/estimate", json=unknown)
        assert away.status_code == 503 and away.headers["Retry-After"], away.text
        known = client.post("/v1/estimate", json=example_body(hardware=hardware))
        assert known.status_code == 200, known.text  # read before: kept by this worker
        listing = client.get("/v1/gpus")
        assert listing.status_code == 200 and len(listing.json()["items"]) >= 24
        assert listing.json()["warnings"] == [
            "the database is unavailable: GPUs added with POST /v1/gpus are not listed"
        ]
    finally:
        bring_database_back(client, database_url)
