"""A quote's response document serialised once (service.db.quote_document): its text is the
response's own JSON, byte for byte; it is stored as that text and read back parsed; spooled, it
is kept whole."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from db_support import quote_row
from sqlalchemy import create_engine, select, text

from service.db.base import Base
from service.db.models import Quote, QuoteRow
from service.db.quote_document import QuoteDocument, json_time
from service.db.repositories import insert_quotes
from service.db.spool import QuoteSpool
from service.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest
from service.schemas.estimate_response import EstimateResponse

LEADING = {"quote_id", "created_at"}
STAMP = datetime(2026, 11, 23, 17, 0, 0, 123456, tzinfo=UTC)
WHOLE_SECOND = datetime(2026, 11, 23, 17, 0, 1, tzinfo=UTC)  # pydantic drops the zero fraction


@pytest.fixture(scope="module")
def response() -> EstimateResponse:
    request = EstimateRequest.model_validate(
        {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "workload": {"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256},
            "hardware": {"gpu": "H100-SXM5-80GB", "count": 1},
            "datacenter": {"region": "DE"},
        }
    )
    return Estimator.from_catalogues().estimate(request).response


def document(response: EstimateResponse, quote_id: str | None) -> QuoteDocument:
    return QuoteDocument.of(response.model_dump_json(exclude=LEADING), quote_id, STAMP)


@pytest.mark.parametrize("quote_id", ["q_01KAWXYZ0000000000000000AB", None])
def test_the_text_is_the_response_json_with_its_id_and_stamp(
    response: EstimateResponse, quote_id: str | None
) -> None:
    quoted = document(response, quote_id)
    expected = response.model_copy(update={"quote_id": quote_id, "created_at": STAMP})
    assert quoted.text() == expected.model_dump_json()
    # Stamped again (as the store does at commit), the text follows.
    quoted.created_at = json_time(WHOLE_SECOND)
    restamped = response.model_copy(update={"quote_id": quote_id, "created_at": WHOLE_SECOND})
    assert quoted.text() == restamped.model_dump_json()
    assert json_time(WHOLE_SECOND) == "2026-11-23T17:00:01Z"
    assert quoted.as_dict() == restamped.model_dump(mode="json")


def test_an_object_without_other_members_is_refused() -> None:
    with pytest.raises(ValueError, match="members"):
        QuoteDocument.of("{}", "q_1", STAMP)
    with pytest.raises(ValueError, match="members"):
        QuoteDocument.of("[1]", "q_1", STAMP)


def row(quote_id: str, response: QuoteDocument | dict[str, object]) -> QuoteRow:
    return quote_row(quote_id, response, STAMP)


def test_a_document_is_stored_as_its_text_and_read_back_parsed(
    tmp_path: Path, response: EstimateResponse
) -> None:
    # A bare engine (no json_serializer of the service's): the column type itself stores it.
    engine = create_engine(f"sqlite:///{tmp_path / 'q.sqlite3'}")
    Base.metadata.create_all(engine)
    quoted = document(response, "q_doc")
    with engine.begin() as connection:
        insert_quotes(connection, [row("q_doc", quoted), row("q_dict", {"energy": {"gpu_j": 2.5}})])
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT id, CAST(response AS TEXT) FROM quotes ORDER BY id")
        ).all()
        parsed = dict(connection.execute(select(Quote.id, Quote.response)).all())
    assert dict(stored)["q_doc"] == quoted.text()  # byte for byte: no second encoding
    assert orjson.loads(dict(stored)["q_dict"]) == {"energy": {"gpu_j": 2.5}}
    assert parsed["q_doc"] == quoted.as_dict()
    assert parsed["q_doc"]["quote_id"] == "q_doc"
    assert parsed["q_dict"] == {"energy": {"gpu_j": 2.5}}
    engine.dispose()


def test_a_spooled_document_is_kept_whole(tmp_path: Path, response: EstimateResponse) -> None:
    quoted = document(response, "q_spooled")
    spool = QuoteSpool(tmp_path / "spool")
    spool.append([row("q_spooled", quoted)])
    [path] = spool.pending()
    [kept] = spool._read(path)
    assert kept.response == quoted.as_dict()
    assert kept.response["carbon"]["factors"]["pue"]["source"]  # a real document, sources in
