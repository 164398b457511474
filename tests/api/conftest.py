"""API test fixtures: an Alembic-migrated database per test module (temp SQLite file, or
TEST_DATABASE_URL for PostgreSQL), a TestClient over an app built by create_app(), and the
repository's client package (client/) sending through that TestClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_support import migrated_database_url, quotes_client, running_client
from fastapi.testclient import TestClient
from llm_energy_quotes_client import QuotesClient


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A freshly migrated schema for this module (upgrade, not create_all)."""
    yield from migrated_database_url(tmp_path_factory)


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client


@pytest.fixture
def quotes(client: TestClient) -> QuotesClient:
    """The client package over this module's app (open dev mode unless the module adds keys)."""
    return quotes_client(client)
