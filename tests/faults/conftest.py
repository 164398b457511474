"""Fault-test fixtures: a freshly migrated database per module (temp SQLite file, or
TEST_DATABASE_URL for PostgreSQL), as in tests/api, whose helpers these tests share."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The API tests' helpers (apps over a migrated database, request bodies, the TCP proxy).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from service.db import migrate


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        migrate.downgrade(url, "base")
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'quotes.sqlite3'}"
    migrate.upgrade(url)
    yield url
    if os.environ.get("TEST_DATABASE_URL"):
        migrate.downgrade(url, "base")
