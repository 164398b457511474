"""quotes.request_hash nullable: a quote's request fingerprint is stored only with its
Idempotency-Key.

The fingerprint is compared only when a key is used again, so a quote stored without a key has
none (null) from this revision on; rows written before keep theirs. PostgreSQL drops the NOT
NULL constraint in place; SQLite rebuilds the table (batch mode), copying every row.

Downgrade gives the rows without a fingerprint the empty string: they have no key, so nothing
compares it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 09:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("quotes") as batch:
        batch.alter_column("request_hash", existing_type=sa.String(length=64), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE quotes SET request_hash = '' WHERE request_hash IS NULL")
    with op.batch_alter_table("quotes") as batch:
        batch.alter_column("request_hash", existing_type=sa.String(length=64), nullable=False)
