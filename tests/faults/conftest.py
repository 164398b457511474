"""Fault-test fixtures: a freshly migrated database per module (temp SQLite file, or
TEST_DATABASE_URL for PostgreSQL), as in tests/api, whose helpers these tests share."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The API tests' helpers (apps over a migrated database, request bodies, the TCP proxy).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from api_support import migrated_database_url


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from migrated_database_url(tmp_path_factory)
