"""API test fixtures: an Alembic-migrated database per test module (temp SQLite file, or
TEST_DATABASE_URL for PostgreSQL) and a TestClient over an app built by create_app()."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_support import migrated_database_url, running_client
from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A freshly migrated schema for this module (upgrade, not create_all)."""
    yield from migrated_database_url(tmp_path_factory)


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client
