"""Alembic migrations: upgrade, downgrade and upgrade again; the models match the schema."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from db_support import quote_row
from sqlalchemy import create_engine, inspect, text

from service.config import Settings
from service.db import migrate
from service.db.base import Base
from service.db.engine import Database
from service.db.quote_store import QuoteStore
from service.db.tables import QuoteRow
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest

STAMP = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)

TABLES = {
    "quotes",
    "carbon_factor_sets",
    "idempotency_claims",
    "observations",
    "api_keys",
    "calibrations",
    "registered_models",
    "rate_limit_windows",
    "registered_gpus",
}


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


def factor_sets_roundtrip(url: str) -> None:
    """Quotes stored at head (documents without factors, sets apart): downgraded to 0004, every
    document is whole again, as its caller was answered; upgraded again, nothing is lost."""
    migrate.upgrade(url)
    documents = {}
    for quote_id, region in (("q_de", "DE"), ("q_fr", "FR"), ("q_de_2", "DE")):
        request = EstimateRequest.model_validate(
            {**EXAMPLE_REQUEST, "datacenter": {"region": region}}
        )
        document = replace(
            Estimator.from_catalogues().estimate(request).document, quote_id=quote_id
        )
        documents[quote_id] = document
    engine = create_engine(url)
    try:
        store_rows(url, [quote_row(q, d, STAMP) for q, d in documents.items()])
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM carbon_factor_sets")).scalar() == 2
        migrate.downgrade(url, "0004")
        assert "carbon_factor_sets" not in tables(url)
        with engine.connect() as connection:
            stored = dict(
                connection.execute(text("SELECT id, CAST(response AS TEXT) FROM quotes")).all()
            )
        assert {q: orjson.loads(t) for q, t in stored.items()} == {
            q: d.as_dict() for q, d in documents.items()
        }
        if engine.dialect.name == "sqlite":  # PostgreSQL's json keeps the text as well
            assert stored == {q: d.text() for q, d in documents.items()}
        migrate.upgrade(url)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM quotes")).scalar() == 3
    finally:
        engine.dispose()


def test_factor_sets_go_back_into_their_documents_on_downgrade_sqlite(tmp_path: Path) -> None:
    factor_sets_roundtrip(f"sqlite:///{tmp_path / 'var' / 'quotes.sqlite3'}")


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set")
def test_factor_sets_go_back_into_their_documents_on_downgrade_postgres() -> None:
    url = os.environ["TEST_DATABASE_URL"]
    migrate.downgrade(url, "base")
    factor_sets_roundtrip(url)
    migrate.downgrade(url, "base")


def store_rows(url: str, rows: list[QuoteRow]) -> None:
    """Commit `rows` (stamped already) as the service stores quotes."""
    database = Database(Settings(database_url=url))
    try:
        QuoteStore(database).commit(rows, stamp=False)
    finally:
        database.dispose()
