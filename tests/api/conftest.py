"""API test fixtures: an Alembic-migrated database per test module (temp SQLite file, or
TEST_DATABASE_URL for PostgreSQL) and a TestClient over an app built by create_app()."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from api_support import running_client
from fastapi.testclient import TestClient

from service.db import migrate


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A freshly migrated schema for this module (upgrade, not create_all)."""
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        migrate.downgrade(url, "base")
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    yield url
    if os.environ.get("TEST_DATABASE_URL"):
        migrate.downgrade(url, "base")


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    with running_client(database_url) as test_client:
        yield test_client
