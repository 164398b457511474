"""Calibrations: scope (tenant or global), owning tenant, model version, rollback chain.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 13:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_calibrations_scope_tenant_is_current"


def upgrade() -> None:
    # Rows written before this revision (none in practice) become global ones of model "".
    with op.batch_alter_table("calibrations") as batch:
        batch.add_column(sa.Column("tenant", sa.String(100), nullable=False, server_default=""))
        batch.add_column(sa.Column("scope", sa.String(10), nullable=False, server_default="global"))
        batch.add_column(
            sa.Column("model_version", sa.String(100), nullable=False, server_default="")
        )
        batch.add_column(sa.Column("previous_id", sa.String(40), nullable=True))
        batch.add_column(sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("calibrations") as batch:
        for column in ("tenant", "scope", "model_version"):
            batch.alter_column(column, server_default=None)
        batch.create_index(INDEX, ["scope", "tenant", "is_current"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("calibrations") as batch:
        batch.drop_index(INDEX)
        for column in ("activated_at", "previous_id", "model_version", "scope", "tenant"):
            batch.drop_column(column)
