"""PostgreSQL: quote documents compressed with lz4 instead of pglz.

A quote document is about 8 KB of JSON, over PostgreSQL's 2 KB TOAST threshold, so every row
written is compressed. With the default pglz that compression was most of the server's time per
quote: a 50-quote group commit took 7.4 ms with pglz and 3.2 ms with lz4 (148 and 64 µs per
quote, PostgreSQL 15 on the 2-core development machine, `QuoteStore.save`). lz4 needs
PostgreSQL 14 or newer built with lz4 (Debian's and the postgres Docker images are); on a
server without it the column keeps pglz and the migration says so. SQLite: nothing to do.

Only rows written after the upgrade are compressed with lz4; older rows stay as they are and
read back the same.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 11:30:00+00:00
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")


def _set_compression(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    savepoint = bind.begin_nested()  # a refusal must not abort the migration's transaction
    try:
        bind.execute(sa.text(f"ALTER TABLE quotes ALTER COLUMN response SET COMPRESSION {method}"))
    except sa.exc.DBAPIError as error:  # PostgreSQL < 14, or built without lz4
        savepoint.rollback()
        logger.warning("quotes.response keeps its compression (%s refused: %s)", method, error)
        return
    savepoint.commit()
