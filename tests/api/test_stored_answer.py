"""What a caller is answered is the stored quote document itself, byte for byte, its carbon
factors stored once per distinct set and put back in their place (single estimates on the hot
path and on the route, and batch items), on SQLite and PostgreSQL."""

from __future__ import annotations

import orjson
from api_support import example_body
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text


def stored_text(database_url: str, quote_id: str) -> str:
    """The quote's stored document with the text of its factor set put back where the carbon
    object ends (the row itself holds no factors, and is under PostgreSQL's 2 KB TOAST
    threshold, so it is stored uncompressed)."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            statement = text(
                "SELECT CAST(q.response AS TEXT), CAST(f.factors AS TEXT) FROM quotes q "
                "JOIN carbon_factor_sets f ON f.id = q.carbon_factor_set_id WHERE q.id = :id"
            )
            document, factors = connection.execute(statement, {"id": quote_id}).one()
    finally:
        engine.dispose()
    # Without the factors; the validation block (~1.1 KB) stays in each row.
    assert '"factors"' not in document and len(document) < 3500
    carbon_end = document.index('},"breakdown":')
    return f'{document[:carbon_end]},"factors":{factors}{document[carbon_end:]}'


def test_single_answers_are_the_stored_documents(client: TestClient, database_url: str) -> None:
    hot_path = client.post("/v1/estimate", json=example_body())
    route = client.post(
        "/v1/estimate", json=example_body(), headers={"Idempotency-Key": "stored-answer-1"}
    )
    for answer in (hot_path, route):
        assert answer.status_code == 200, answer.text
        quote_id = answer.json()["quote_id"]
        assert quote_id is not None
        assert stored_text(database_url, quote_id).encode() == answer.content
    # Replayed from the database, the keyed answer carries the same document.
    replay = client.post(
        "/v1/estimate", json=example_body(), headers={"Idempotency-Key": "stored-answer-1"}
    )
    assert replay.json() == route.json()


def test_batch_items_are_the_stored_documents(client: TestClient, database_url: str) -> None:
    items = [example_body(), {"model": "no/such-model"}, example_body(datacenter={"region": "FR"})]
    answer = client.post("/v1/estimate/batch", json={"items": items})
    assert answer.status_code == 200, answer.text
    answered = [orjson.dumps(item) for item in answer.json()["items"]]
    quote_ids = [item.get("quote_id") for item in answer.json()["items"]]
    assert quote_ids[0] and quote_ids[2] and "quote_id" not in answer.json()["items"][1]
    for position in (0, 2):
        stored = stored_text(database_url, quote_ids[position])
        assert stored.encode() in answer.content  # the very bytes, inside the batch answer
        assert orjson.dumps(orjson.loads(stored)) == answered[position]
