"""Idempotency claims: an Idempotency-Key in flight, seen by every process.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 11:15:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_claims",
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=False),
        sa.Column("holder", sa.String(length=40), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "idempotency_key", name=op.f("pk_idempotency_claims")),
    )


def downgrade() -> None:
    op.drop_table("idempotency_claims")
