"""Helpers of the API tests: settings, apps over a migrated database, keys, request bodies."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from service.api.deps import AppServices
from service.auth import generate_key
from service.config import Settings
from service.db.base import utc_now
from service.db.engine import Database
from service.db.models import ApiKey
from service.db.repositories import ApiKeyRepository
from service.main import create_app


def example_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
    }
    body.update(overrides)
    return body


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "run_migrations_on_start": False,
        "api_key_mode_ttl_s": 0.0,
        "sqlite_busy_timeout_ms": 500,
        "db_connect_timeout_s": 1.0,
        "log_level": "WARNING",
    }
    values.update(overrides)
    return Settings(**values)


@contextmanager
def running_client(database_url: str, **overrides: Any) -> Iterator[TestClient]:
    app = create_app(make_settings(database_url, **overrides))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def services_of(client: TestClient) -> AppServices:
    services: AppServices = client.app.state.services  # type: ignore[attr-defined]
    return services


def create_key(database_url: str, tenant: str, scopes: str) -> str:
    """A new API key (the secret) stored for `tenant`."""
    new = generate_key()
    database = Database(make_settings(database_url))
    try:
        with database.sessions.begin() as session:
            ApiKeyRepository(session).add(
                ApiKey(
                    tenant=tenant,
                    scopes=scopes,
                    prefix=new.prefix,
                    key_sha256=new.sha256,
                    created_at=utc_now(),
                )
            )
    finally:
        database.dispose()
    return new.secret


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def take_database_away(client: TestClient) -> None:
    """Point the app's engine at a database that cannot be reached."""
    if os.environ.get("TEST_DATABASE_URL"):
        url = "postgresql+psycopg://nobody:nothing@127.0.0.1:1/none?connect_timeout=1"
    else:
        url = "sqlite:////proc/no-such-dir/quotes.sqlite3"
    database = services_of(client).database
    database.engine.dispose()
    database.engine = create_engine(url)
    database.sessions.configure(bind=database.engine)
