"""Migration 0004: PostgreSQL compresses quote documents with lz4; a server that refuses a
compression method keeps its column as it was and the migration goes on."""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import create_engine, text

from service.db import migrate

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set"),
]
COMPRESSION = (
    "SELECT attcompression FROM pg_attribute "
    "WHERE attrelid = 'quotes'::regclass AND attname = 'response'"
)


def compression(url: str) -> str:
    """pg_attribute.attcompression of quotes.response: 'l' lz4, 'p' pglz, '' the default."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return str(connection.execute(text(COMPRESSION)).scalar_one())
    finally:
        engine.dispose()


def migration_0004() -> ModuleType:
    path = next((migrate.PROJECT_ROOT / "migrations" / "versions").glob("*-0004_*.py"))
    spec = importlib.util.spec_from_file_location("migration_0004", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quote_documents_are_compressed_with_lz4_and_back_with_pglz() -> None:
    url = os.environ["TEST_DATABASE_URL"]
    migrate.downgrade(url, "base")
    try:
        migrate.upgrade(url, "0003")
        assert compression(url) == ""  # the server's default, pglz unless configured
        migrate.upgrade(url)
        assert compression(url) == "l"
        migrate.downgrade(url, "0003")
        assert compression(url) == "p"
    finally:
        migrate.downgrade(url, "base")


def test_a_refused_method_leaves_the_column_and_the_transaction_usable() -> None:
    url = os.environ["TEST_DATABASE_URL"]
    migrate.downgrade(url, "base")
    migrate.upgrade(url)
    engine = create_engine(url)
    try:
        with (
            engine.begin() as connection,
            Operations.context(MigrationContext.configure(connection)),
        ):
            migration_0004()._set_compression("no_such_method")
            # The refusal was rolled back to its savepoint: the transaction still works.
            assert connection.execute(text(COMPRESSION)).scalar_one() == "l"
        assert compression(url) == "l"
    finally:
        engine.dispose()
        migrate.downgrade(url, "base")
