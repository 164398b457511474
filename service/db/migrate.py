"""Run the Alembic migrations in `migrations/` (used at start-up, by the CLI and by tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from service.db.engine import ensure_sqlite_directory

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ALEMBIC_INI = PROJECT_ROOT / "alembic.ini"


def alembic_config(database_url: str) -> Config:
    """Alembic's config for `database_url` (logging left to the caller)."""
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    ensure_sqlite_directory(database_url)
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)
