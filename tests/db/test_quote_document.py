"""A quote's response document serialised once (service.db.quote_document): its text is the
response's own JSON, byte for byte; its row stores it without the carbon factors, which are
stored once per distinct set and put back when the quote is read; spooled, it is kept whole."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from db_support import quote_row
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.base import Base
from service.db.engine import Database
from service.db.quote_document import CarbonFactorSet, QuoteDocument, json_time
from service.db.quote_store import QuoteStore
from service.db.repositories import stored_response
from service.db.spool import QuoteSpool
from service.db.tables import Quote, QuoteRow, StoredFactorSet
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest
from service.schemas.estimate_response import EstimateResponse

STAMP = datetime(2026, 11, 23, 17, 0, 0, 123456, tzinfo=UTC)
WHOLE_SECOND = datetime(2026, 11, 23, 17, 0, 1, tzinfo=UTC)  # pydantic drops the zero fraction


def priced(region: str) -> QuoteDocument:
    request = EstimateRequest.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
            "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
            "datacenter": {"region": region},
        }
    )
    return Estimator.from_catalogues().estimate(request).document


@pytest.fixture(scope="module")
def document() -> QuoteDocument:
    return priced("DE")


def quoted(document: QuoteDocument, quote_id: str | None) -> QuoteDocument:
    return replace(document, quote_id=quote_id, created_at=json_time(STAMP))


@pytest.mark.parametrize("quote_id", ["q_01KAWXYZ0000000000000000AB", None])
def test_the_text_is_the_responses_own_json_with_its_id_and_stamp(
    document: QuoteDocument, quote_id: str | None
) -> None:
    stamped = quoted(document, quote_id)
    response = EstimateResponse.model_validate_json(stamped.text())
    assert (response.quote_id, response.created_at) == (quote_id, STAMP)
    assert response.model_dump_json() == stamped.text()  # pydantic writes the very same text
    assert set(response.carbon.factors) >= {"pue", "carbon_intensity_g_per_kwh"}
    # Stamped again (as the store does at commit), the text follows.
    stamped.created_at = json_time(WHOLE_SECOND)
    restamped = response.model_copy(update={"created_at": WHOLE_SECOND})
    assert stamped.text() == restamped.model_dump_json()
    assert json_time(WHOLE_SECOND) == "2026-11-23T17:00:01Z"
    assert stamped.as_dict() == restamped.model_dump(mode="json")


def test_the_stored_text_is_the_text_without_the_factors(document: QuoteDocument) -> None:
    stamped = quoted(document, "q_1")
    whole, stored = orjson.loads(stamped.text()), orjson.loads(stamped.stored_text())
    factors = whole["carbon"].pop("factors")
    assert stored == whole  # nothing else differs, and the order of the rest is kept
    assert list(whole["carbon"]) == list(stored["carbon"])
    assert orjson.dumps(factors).decode() == stamped.factors.json
    assert stamped.factors.id == CarbonFactorSet.of(stamped.factors.json).id
    # The validation block (~1.1 KB) stays in the row; the factors (~6 KB) do not.
    assert len(stamped.stored_text()) < 3500 < 7000 < len(stamped.text())


def test_an_object_without_a_factors_placeholder_is_refused() -> None:
    factors = CarbonFactorSet.of("{}")
    with pytest.raises(ValueError, match="carbon factors"):
        QuoteDocument.written('{"carbon":{"pue":1.2}}', STAMP, factors)
    with pytest.raises(ValueError, match="carbon factors"):
        QuoteDocument.written('[1,"factors":null]', STAMP, factors)


def row(quote_id: str, response: QuoteDocument | dict[str, object]) -> QuoteRow:
    return quote_row(quote_id, response, STAMP)


def test_documents_are_stored_without_their_factors_once_per_set_and_read_back_whole(
    tmp_path: Path, document: QuoteDocument
) -> None:
    # A bare engine (no json_serializer of the service's): the column types themselves store it.
    engine = create_engine(f"sqlite:///{tmp_path / 'q.sqlite3'}")
    Base.metadata.create_all(engine)
    in_fr = priced("FR")
    assert in_fr.factors.id != document.factors.id
    rows = [
        row("q_de1", quoted(document, "q_de1")),
        row("q_de2", quoted(document, "q_de2")),
        row("q_fr", quoted(in_fr, "q_fr")),
        row("q_dict", {"energy": {"gpu_j": 2.5}}),
    ]
    database = Database(Settings(database_url=f"sqlite:///{tmp_path / 'q.sqlite3'}"))
    store = QuoteStore(database)
    store.commit(rows[:1], stamp=False)
    store.commit(rows[1:], stamp=False)  # q_de2's set is stored already: not stored again
    database.dispose()
    with engine.connect() as connection:
        stored = dict(
            connection.execute(
                text("SELECT id, CAST(response AS TEXT) FROM quotes WHERE id != 'q_de2'")
            ).all()
        )
        sets = dict(
            connection.execute(
                text("SELECT id, CAST(factors AS TEXT) FROM carbon_factor_sets")
            ).all()
        )
    assert stored["q_de1"] == quoted(document, "q_de1").stored_text()  # byte for byte
    assert orjson.loads(stored["q_dict"]) == {"energy": {"gpu_j": 2.5}}
    assert sets == {
        document.factors.id: document.factors.json,
        in_fr.factors.id: in_fr.factors.json,
    }
    with Session(engine) as session:
        quotes = {q.id: q for q in session.scalars(select(Quote))}
        assert session.scalar(select(func.count()).select_from(StoredFactorSet)) == 2
        for new in rows[:3]:
            answered = new.response
            assert isinstance(answered, QuoteDocument)
            whole = stored_response(session, quotes[new.id])
            assert orjson.dumps(whole).decode() == answered.text()  # as its caller was answered
        assert quotes["q_de1"].response["carbon"].get("factors") is None  # the row is untouched
        assert stored_response(session, quotes["q_dict"]) == {"energy": {"gpu_j": 2.5}}
    engine.dispose()


def test_a_spooled_document_is_kept_whole(tmp_path: Path, document: QuoteDocument) -> None:
    stamped = quoted(document, "q_spooled")
    spool = QuoteSpool(tmp_path / "spool")
    spool.append([row("q_spooled", stamped)])
    [path] = spool.pending()
    [kept] = spool._read(path)
    assert kept.response == stamped.as_dict()
    assert kept.response["carbon"]["factors"]["pue"]["source"]  # a real document, sources in
    assert kept.carbon_factor_set_id is None  # nothing to look up when it is replayed
