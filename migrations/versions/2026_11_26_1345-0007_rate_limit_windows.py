"""Rate-limit windows: per-key request counts shared by every replica on PostgreSQL.

One row per (API key, policy, fixed window), incremented by an upsert per keyed request and
deleted once its window is long over (service/db/rate_limit_windows.py). On PostgreSQL the
table is UNLOGGED: counters need no durability (a crash empties it, which only starts the
current windows afresh), and a write to it waits for no WAL flush. SQLite keeps its counters in
each process and never writes here.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 13:45:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    unlogged = ["UNLOGGED"] if op.get_bind().dialect.name == "postgresql" else []
    op.create_table(
        "rate_limit_windows",
        sa.Column("key_id", sa.String(length=100), nullable=False),
        sa.Column("policy", sa.String(length=20), nullable=False),
        sa.Column("window_start_s", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "key_id", "policy", "window_start_s", name=op.f("pk_rate_limit_windows")
        ),
        prefixes=unlogged,
    )
    op.create_index(
        op.f("ix_rate_limit_windows_window_start_s"), "rate_limit_windows", ["window_start_s"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_rate_limit_windows_window_start_s"), table_name="rate_limit_windows")
    op.drop_table("rate_limit_windows")
