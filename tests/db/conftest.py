"""Fixtures of the database tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from db_support import empty
from sqlalchemy import create_engine

from service.config import Settings
from service.db import migrate
from service.db.engine import Database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    """A migrated SQLite database of the test's own, with the service's engine settings."""
    url = f"sqlite:///{tmp_path / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    database = Database(Settings(database_url=url))
    yield database
    database.dispose()


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """TEST_DATABASE_URL migrated afresh for the module (skipped without it), emptied and
    downgraded afterwards."""
    url = os.environ.get("TEST_DATABASE_URL")
    if not url:
        pytest.skip("TEST_DATABASE_URL not set")
    migrate.downgrade(url, "base")
    migrate.upgrade(url)
    yield url
    empty(create_engine(url))  # the tests' documents are not real quotes' to downgrade
    migrate.downgrade(url, "base")
