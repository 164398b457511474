"""GET /v1/health/live answers while the process serves; GET /v1/health/ready only while quotes
can be stored: the database answers and its schema is at the code's newest migration."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from api_support import bring_database_back, running_client, take_database_away

from service.db import migrate

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def newest_migration() -> str:
    """The revision no other migration builds on, read from the files themselves."""
    revisions, parents = set(), set()
    for path in VERSIONS.glob("*.py"):
        text = path.read_text()
        revisions |= set(re.findall(r'^revision: str = "(\w+)"', text, flags=re.M))
        parents |= set(re.findall(r'^down_revision: str \| None = "(\w+)"', text, flags=re.M))
    (head,) = revisions - parents
    return head


def test_ready_and_live_on_a_migrated_database(database_url: str) -> None:
    with running_client(database_url) as client:
        live = client.get("/v1/health/live")
        assert live.status_code == 200 and live.json() == {"status": "alive"}
        ready = client.get("/v1/health/ready")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "ready" and body["database"]["reachable"] is True
        assert body["schema_revision"] == body["head_revision"] == newest_migration()


def test_not_ready_but_alive_while_the_database_is_away(database_url: str) -> None:
    with running_client(database_url) as client:
        take_database_away(client)
        try:
            ready = client.get("/v1/health/ready")
            assert ready.status_code == 503
            assert ready.json()["type"].endswith("/database-unavailable")
            assert ready.headers["retry-after"] == "5"
            assert client.get("/v1/health/live").status_code == 200
        finally:
            bring_database_back(client, database_url)
        assert client.get("/v1/health/ready").status_code == 200


@pytest.mark.skipif(bool(os.environ.get("TEST_DATABASE_URL")), reason="a private SQLite file")
def test_not_ready_while_the_schema_is_behind_the_code(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'behind.sqlite3'}"
    head = newest_migration()
    migrate.upgrade(url, "head")
    migrate.downgrade(url, "-1")
    with running_client(url) as client:
        ready = client.get("/v1/health/ready")
        assert ready.status_code == 503
        assert f"the code needs {head!r}" in ready.json()["detail"]
        migrate.upgrade(url)
        assert client.get("/v1/health/ready").status_code == 200
