"""Migration 0009: quotes.request_hash becomes nullable (a quote stored without an
Idempotency-Key has no fingerprint); rows stored before keep theirs, the observations posted
for them stay, and a downgrade gives the rows without one the empty string."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError

from service.db import migrate

STAMP = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
OLD_HASH = "a" * 64
INSERT_QUOTE = text(
    "INSERT INTO quotes (id, tenant, idempotency_key, request_hash, request, response, "
    "model_version, calibration_id, model_id, gpu_id, gpu_count, created_at) VALUES "
    "(:id, 'acme', :key, :hash, '{}', '{}', 'v', NULL, 'm', 'L4', 1, :at)"
)
INSERT_OBSERVATION = text(
    "INSERT INTO observations (id, quote_id, tenant, idempotency_key, request_hash, gpu_j, "
    "total_s, measured_with, measured_at, created_at) VALUES "
    "('o_1', 'q_old', 'acme', NULL, 'b', 1.0, NULL, 'nvml', :at, :at)"
)


def _hashes(url: str) -> dict[str, str | None]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return dict(connection.execute(text("SELECT id, request_hash FROM quotes")).all())
    finally:
        engine.dispose()


def _execute(url: str, *statements: tuple[object, dict[str, object]]) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            for statement, parameters in statements:
                connection.execute(statement, parameters)  # type: ignore[call-overload]
    finally:
        engine.dispose()


def request_hash_roundtrip(url: str) -> None:
    migrate.upgrade(url, "0008")
    old = {"id": "q_old", "key": "retry-1", "hash": OLD_HASH, "at": STAMP}
    _execute(url, (INSERT_QUOTE, old), (INSERT_OBSERVATION, {"at": STAMP}))
    migrate.upgrade(url, "0009")
    assert _hashes(url) == {"q_old": OLD_HASH}
    _execute(url, (INSERT_QUOTE, {"id": "q_new", "key": None, "hash": None, "at": STAMP}))
    assert _hashes(url) == {"q_old": OLD_HASH, "q_new": None}
    engine = create_engine(url)
    try:
        with engine.connect() as connection:  # the table rebuilt under it, the observation stays
            found = connection.execute(text("SELECT quote_id FROM observations")).all()
        assert [row[0] for row in found] == ["q_old"]
    finally:
        engine.dispose()
    migrate.downgrade(url, "0008")
    assert _hashes(url) == {"q_old": OLD_HASH, "q_new": ""}
    with pytest.raises(IntegrityError):  # NOT NULL again
        _execute(url, (INSERT_QUOTE, {"id": "q_3", "key": None, "hash": None, "at": STAMP}))


def test_request_hash_becomes_nullable_on_sqlite(tmp_path: Path) -> None:
    request_hash_roundtrip(f"sqlite:///{tmp_path / 'quotes.sqlite3'}")


@pytest.mark.postgres
@pytest.mark.skipif(not os.environ.get("TEST_DATABASE_URL"), reason="TEST_DATABASE_URL not set")
def test_request_hash_becomes_nullable_on_postgres() -> None:
    url = os.environ["TEST_DATABASE_URL"]
    migrate.downgrade(url, "base")
    try:
        request_hash_roundtrip(url)
    finally:
        _execute(url, (text("DELETE FROM observations"), {}), (text("DELETE FROM quotes"), {}))
        migrate.downgrade(url, "base")
