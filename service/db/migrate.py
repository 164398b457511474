"""Run the Alembic migrations in `migrations/` (used at start-up, by the CLI and by tests)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from service.db.engine import Database, ensure_sqlite_directory

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


@cache
def head_revision() -> str | None:
    """The newest migration in migrations/ (read once per process)."""
    config = alembic_config("sqlite://")  # the URL is not used to read the scripts
    return ScriptDirectory.from_config(config).get_current_head()


def current_revision(database: Database) -> str | None:
    """The revision the database's schema is at (None: never migrated). Raises SQLAlchemyError
    when the database cannot be reached."""
    with database.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
