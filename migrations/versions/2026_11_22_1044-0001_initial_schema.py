"""Initial schema: quotes, observations, api_keys, calibrations.

Revision ID: 0001
Revises:
Create Date: 2026-11-22 10:44:41+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("scopes", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_table(
        "calibrations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibrations")),
    )
    op.create_table(
        "quotes",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("model_version", sa.String(length=100), nullable=False),
        sa.Column("calibration_id", sa.String(length=40), nullable=True),
        sa.Column("model_id", sa.String(length=200), nullable=False),
        sa.Column("gpu_id", sa.String(length=100), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quotes")),
        sa.UniqueConstraint(
            "tenant", "idempotency_key", name=op.f("uq_quotes_tenant_idempotency_key")
        ),
    )
    op.create_index(
        "ix_quotes_tenant_created_at_id", "quotes", ["tenant", "created_at", "id"], unique=False
    )
    op.create_table(
        "observations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("quote_id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("gpu_j", sa.Float(), nullable=False),
        sa.Column("total_s", sa.Float(), nullable=True),
        sa.Column("measured_with", sa.String(length=50), nullable=False),
        sa.Column("measured_at", TIMESTAMP, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["quote_id"],
            ["quotes.id"],
            name=op.f("fk_observations_quote_id_quotes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_observations")),
        sa.UniqueConstraint(
            "tenant", "idempotency_key", name=op.f("uq_observations_tenant_idempotency_key")
        ),
    )
    op.create_index(op.f("ix_observations_quote_id"), "observations", ["quote_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_observations_quote_id"), table_name="observations")
    op.drop_table("observations")
    op.drop_index("ix_quotes_tenant_created_at_id", table_name="quotes")
    op.drop_table("quotes")
    op.drop_table("calibrations")
    op.drop_table("api_keys")
