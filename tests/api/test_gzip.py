"""Large answers (batches) are gzipped for clients that accept it; single quotes stay plain."""

from __future__ import annotations

import gzip
import json

from api_support import example_body
from fastapi.testclient import TestClient


def test_a_large_batch_is_gzipped_and_a_single_quote_is_not(client: TestClient) -> None:
    body = {"items": [example_body()] * 20}  # about 150 KB of answers, over the 64 KiB default
    accepting = {"accept-encoding": "gzip"}
    raw = client.post("/v1/estimate/batch", json=body, headers=accepting)
    assert raw.status_code == 200
    assert raw.headers["content-encoding"] == "gzip"
    answers = raw.json()["items"]  # httpx decodes it
    assert len(answers) == 20 and all(a["quote_id"] for a in answers)
    single = client.post("/v1/estimate", json=example_body(), headers=accepting)
    assert "content-encoding" not in single.headers
    assert "vary" not in single.headers  # under the minimum: passed on as it is


def test_a_client_that_does_not_accept_gzip_gets_plain_json(client: TestClient) -> None:
    body = {"items": [example_body()] * 20}
    plain = client.post("/v1/estimate/batch", json=body, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"  # a cache must not serve it to others
    assert len(json.loads(plain.content)["items"]) == 20


def test_the_compressed_bytes_are_the_plain_answer_gzipped(client: TestClient) -> None:
    body = {"items": [example_body()] * 20}
    with client.stream(
        "POST", "/v1/estimate/batch", json=body, headers={"accept-encoding": "gzip"}
    ) as answer:
        compressed = b"".join(answer.iter_raw())
    document = json.loads(gzip.decompress(compressed))
    assert len(compressed) < len(json.dumps(document)) / 3  # JSON compresses well
    assert [item["model"] for item in document["items"]] == [example_body()["model"]] * 20
