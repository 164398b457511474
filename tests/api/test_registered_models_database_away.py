"""With the database away, an estimate naming a registered model answers 503 (it cannot be
read), while catalogue models and their variants are still priced (open dev mode)."""

from __future__ import annotations

from api_support import bring_database_back, example_body, take_database_away
from fastapi.testclient import TestClient

CONFIG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def test_a_registered_model_needs_the_database(client: TestClient, database_url: str) -> None:
    created = client.post("/v1/models", json={"id": "dev/small-llama", "config": CONFIG})
    assert created.status_code == 201, created.text
    assert (
        client.post("/v1/estimate", json=example_body(model="dev/small-llama")).status_code == 200
    )
    take_database_away(client)
    try:
        away = client.post("/v1/estimate", json=example_body(model="dev/small-llama"))
        assert away.status_code == 503 and away.headers["Retry-After"], away.text
        listing = client.get("/v1/models")  # the public catalogue still answers
        assert listing.status_code == 200 and len(listing.json()["items"]) > 50
        assert listing.json()["warnings"] == [
            "the database is unavailable: the tenant's registered models are not listed"
        ]
        for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B-AWQ"):
            priced = client.post("/v1/estimate", json=example_body(model=model))
            assert priced.status_code == 200, priced.text
            assert priced.json()["quote_id"] is None  # not stored, and says so
    finally:
        bring_database_back(client, database_url)
