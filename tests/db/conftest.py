"""Fixtures of the database tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
