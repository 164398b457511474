"""Carbon factor sets are stored once: by the first transaction that commits a quote naming one,
then remembered by the quote store (no statement for them in later transactions); a set whose
transaction was refused is not remembered, and is stored by the next one; two stores (two
worker processes) storing the same set at once leave one row; after a failed save the sets are
stored again rather than trusted from memory."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from db_support import quote_row
from sqlalchemy import create_engine, delete, func, select

from service.db.engine import Database
from service.db.ids import new_quote_id
from service.db.quote_document import QuoteDocument
from service.db.quote_store import QuoteStore
from service.db.repositories import stored_response
from service.db.store_outcomes import DuplicateIdempotencyKey, Saved, StoreFailed
from service.db.tables import Quote, QuoteRow, StoredFactorSet
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EXAMPLE_REQUEST, EstimateRequest


@pytest.fixture(scope="module")
def document() -> QuoteDocument:
    request = EstimateRequest.model_validate(EXAMPLE_REQUEST)
    return Estimator.from_catalogues().estimate(request).document


def new_row(document: QuoteDocument, key: str | None = None) -> QuoteRow:
    quote_id = new_quote_id()
    row = quote_row(quote_id, replace(document, quote_id=quote_id), datetime.now(UTC))
    row.idempotency_key = key
    return row


def forget_stored_sets(database: Database) -> None:
    """Delete the stored factor sets behind the stores' backs: a store that still inserts a
    set stores it again, one that remembers it stored does not (the row stays missing)."""
    with database.sessions.begin() as session:
        session.execute(delete(StoredFactorSet))


def factor_set_rows(database: Database) -> int:
    with database.sessions() as session:
        return session.scalar(select(func.count()).select_from(StoredFactorSet)) or 0


def test_a_set_is_stored_by_its_first_transaction_then_remembered(
    database: Database, document: QuoteDocument
) -> None:
    store = QuoteStore(database)
    assert store.save([new_row(document), new_row(document)]) is Saved.STORED
    assert factor_set_rows(database) == 1
    forget_stored_sets(database)
    assert store.save([new_row(document)]) is Saved.STORED
    assert factor_set_rows(database) == 0  # the second transaction did not insert it again
    assert QuoteStore(database).save([new_row(document)]) is Saved.STORED
    assert factor_set_rows(database) == 1  # a store that had not seen it stored inserts it
    with database.sessions() as session:
        quotes = list(session.scalars(select(Quote)))
        assert len(quotes) == 4
        for stored in quotes:
            whole = stored_response(session, stored)
            assert whole["carbon"]["factors"]["pue"]["value"] > 1.0


def test_a_refused_transaction_leaves_its_set_to_the_next_one(
    database: Database, document: QuoteDocument
) -> None:
    store = QuoteStore(database)
    assert store.save([new_row(document, key="k1")]) is Saved.STORED
    other_store = QuoteStore(database)  # another worker: it has not seen the set committed
    with pytest.raises(DuplicateIdempotencyKey):
        other_store.save([new_row(document, key="k1")])  # rolled back, set insert included
    forget_stored_sets(database)
    assert other_store.save([new_row(document)]) is Saved.STORED
    assert factor_set_rows(database) == 1  # not remembered after the refusal: stored again


def test_two_stores_storing_one_set_leave_one_row(
    database: Database, document: QuoteDocument
) -> None:
    first, second = QuoteStore(database), QuoteStore(database)
    assert first.save([new_row(document)]) is Saved.STORED
    assert second.save([new_row(document)]) is Saved.STORED  # conflict ignored, not an error
    assert factor_set_rows(database) == 1


def test_a_failed_save_forgets_the_sets_it_remembered(
    database: Database, document: QuoteDocument
) -> None:
    """After the database refused a save (it may come back as another one: a failover, a
    restore), the sets are stored again rather than trusted from memory."""
    store = QuoteStore(database)
    assert store.save([new_row(document)]) is Saved.STORED
    healthy_engine = database.engine
    database.engine = create_engine("sqlite:////proc/no-such-dir/quotes.sqlite3")
    with pytest.raises(StoreFailed):  # no spool: the failure is the caller's
        store.save([new_row(document)])
    database.engine.dispose()
    database.engine = healthy_engine
    forget_stored_sets(database)
    assert store.save([new_row(document)]) is Saved.STORED
    assert factor_set_rows(database) == 1  # the set was stored again, not trusted from memory
