"""Service settings: one BaseSettings, read from `QUOTES_*` environment variables at start-up."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, PositiveFloat, PositiveInt
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./var/quotes.sqlite3"


class Settings(BaseSettings):
    """Everything the web layer can be configured with; the core never reads settings."""

    model_config = SettingsConfigDict(env_prefix="QUOTES_", extra="ignore", frozen=True)

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        validation_alias=AliasChoices("QUOTES_DATABASE_URL", "DATABASE_URL", "database_url"),
        description="SQLAlchemy URL; SQLite file under ./var by default, PostgreSQL via psycopg.",
    )
    run_migrations_on_start: bool = True
    db_connect_timeout_s: PositiveFloat = 3.0
    db_pool_timeout_s: PositiveFloat = 2.0
    db_statement_timeout_ms: PositiveInt = 5000
    sqlite_busy_timeout_ms: PositiveInt = 2000
    retry_after_s: PositiveInt = 5
    max_body_bytes: PositiveInt = 2 * 1024 * 1024
    max_batch_items: PositiveInt = 1000
    require_api_key: bool = Field(
        default=False,
        description="Refuse the open dev mode even when no API key exists (production).",
    )
    api_key_mode_ttl_s: float = Field(
        default=5.0, ge=0, description="How long the 'any key configured?' answer is cached [s]."
    )
    spool_dir: Path | None = Field(
        default=None,
        description="Durable local spool for quotes the database refuses (a persistent volume); "
        "off by default, when such quotes are answered with quote_id null.",
    )
    spool_replay_interval_s: PositiveFloat = 5.0
    # Placeholders for the learned regressor (a later issue): one onnxruntime session per process.
    onnx_model_path: Path | None = None
    onnx_intra_op_threads: PositiveInt = 1
    onnx_inter_op_threads: PositiveInt = 1
    log_level: str = "INFO"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (validated once)."""
    return Settings()
