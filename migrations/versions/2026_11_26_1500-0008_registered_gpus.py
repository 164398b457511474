"""Registered GPUs: GPUs the operator adds for every tenant (POST /v1/gpus), each its figures.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 15:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "registered_gpus",
        sa.Column("gpu_id", sa.String(length=100), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("gpu_id", name=op.f("pk_registered_gpus")),
    )


def downgrade() -> None:
    op.drop_table("registered_gpus")
