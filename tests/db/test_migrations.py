"""Alembic migrations: upgrade, downgrade and upgrade again; the models match the schema."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from service.db import migrate
from service.db.base import Base

TABLES = {"quotes", "idempotency_claims", "observations", "api_keys", "calibrations"}


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def roundtrip(url: str) -> None:
    migrate.upgrade(url)
    assert tables(url) == TABLES
    migrate.downgrade(url, "base")
    assert tables(url) == set()
    migrate.upgrade(url)
    assert tables(url) == TABLES
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    assert diff == [], f"models and migrations differ: {diff}"


def test_migrations_roundtrip_on_sqlite(tmp_path: Path) -> None:
    roundtrip(f"sqlite:///{tmp_path / 'var' / 'quotes.sqlite3'}")


def test_migration_files_are_date_prefixed() -> None:
    versions = Path(migrate.PROJECT_ROOT / "migrations" / "versions").glob("*.py")
    names = [path.name for path in versions]
    assert names
    assert all(name[:4].isdigit() and name[4] == "_" for name in names), names


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set")
def test_migrations_roundtrip_on_postgres() -> None:
    url = os.environ["TEST_DATABASE_URL"]
    migrate.downgrade(url, "base")
    roundtrip(url)
    migrate.downgrade(url, "base")
