"""Carbon factor sets: a quote's `carbon.factors` stored once per distinct set.

A quote document is about 7.5 KB of JSON, 5.9 KB of which are the carbon factors with their
sources; they depend on the request's region, GPU and overrides only, so the few distinct sets
repeat across every quote. From this revision on a quote row stores its document without them
and names its set (`quotes.carbon_factor_set_id`, the sha256 of the set's JSON text); the set
is stored once in `carbon_factor_sets`, inserted in the transaction of the first quote that
names it. Reading a quote puts them back (`repositories.stored_response`). Rows written before
keep their whole documents (no set id) and read back the same.

Downgrade puts every set back into the documents that name it (as the caller was answered),
then drops the column and the table.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 09:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
PAGE_ROWS = 1000
# A stored document (service/db/quote_document.py) ends its carbon object just before this;
# no string value can hold it unescaped, so it marks where `factors` went.
CARBON_END = '},"breakdown":'


def upgrade() -> None:
    op.create_table(
        "carbon_factor_sets",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("factors", sa.JSON(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_carbon_factor_sets")),
    )
    op.add_column("quotes", sa.Column("carbon_factor_set_id", sa.String(length=64), nullable=True))


def downgrade() -> None:
    bind = op.get_bind()
    as_json = "CAST(:document AS JSON)" if bind.dialect.name == "postgresql" else ":document"
    select_page = sa.text(
        "SELECT q.id, CAST(q.response AS TEXT), CAST(f.factors AS TEXT) FROM quotes q "
        "JOIN carbon_factor_sets f ON f.id = q.carbon_factor_set_id "
        f"ORDER BY q.id LIMIT {PAGE_ROWS}"
    )
    inline = sa.text(
        f"UPDATE quotes SET response = {as_json}, carbon_factor_set_id = NULL WHERE id = :id"
    )
    while page := bind.execute(select_page).all():
        bind.execute(
            inline,
            [
                {"id": quote_id, "document": _with_factors(document, factors)}
                for quote_id, document, factors in page
            ],
        )
    with op.batch_alter_table("quotes") as batch:
        batch.drop_column("carbon_factor_set_id")
    op.drop_table("carbon_factor_sets")


def _with_factors(document: str, factors: str) -> str:
    at = document.index(CARBON_END)
    return f'{document[:at]},"factors":{factors}{document[at:]}'
