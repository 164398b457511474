"""POST /v1/estimate/batch while the database is away: every priced item is spooled under its
own quote id and answered with the spool warning, a bad item answers its problem in place, and
the spooled quotes appear in GET /v1/quotes once replayed, as they were answered."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from api_support import example_body, running_client, services_of, take_database_away

from service.quotes.service import SPOOLED_WARNING

ITEMS: list[dict[str, Any]] = [
    example_body(),
    example_body(workload={"batch_size": 3, "prompt_tokens": 700, "output_tokens": 1}),
    example_body(
        model="mistralai/Mixtral-8x7B-Instruct-v0.1",
        hardware={"gpu": "A100-SXM4-80GB", "count": 4},
        datacenter={"region": "DE"},
    ),
    example_body(
        model="Qwen/Qwen3-30B-A3B",
        hardware={"gpu": "H100-SXM5-80GB", "count": 2, "parallelism": {"expert": 2}},
        workload={"batch_size": 16, "prompt_tokens": 100, "output_tokens": 40},
    ),
    example_body(model="google/gemma-2-9b-it", hardware={"gpu": "L40S", "count": 1}),
    example_body(hardware={"gpu": "H1OO"}),  # unknown GPU
    example_body(workload={"batch_size": 4096, "prompt_tokens": 60000, "output_tokens": 60000}),
    example_body(hardware={"gpu": "H100-SXM5-80GB", "count": 64, "parallelism": {"pipeline": 64}}),
    example_body(workload={"batch_size": "8", "prompt_tokens": 1, "output_tokens": 1}),
    example_body(workload={"batch_size": 1, "prompt_tokens": 9000, "output_tokens": 17}),
    example_body(
        model=None,
        architecture={
            "hidden_size": 2048,
            "num_layers": 16,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "intermediate_size": 8192,
            "vocab_size": 32000,
        },
    ),
    example_body(),
]


def test_batch_spooled_while_the_database_is_away_keeps_every_quote(
    database_url: str, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    # the third names a GPU the catalogue lacks: it may be one added with POST /v1/gpus, which
    # cannot be read while the database is away (503, to retry), the others are priced
    items = [ITEMS[0], ITEMS[2], ITEMS[5], ITEMS[3]]
    with running_client(database_url, spool_dir=spool_dir, spool_replay_interval_s=0.2) as client:
        services = services_of(client)
        real_engine = services.database.engine
        take_database_away(client)
        answers = client.post("/v1/estimate/batch", json={"items": items}).json()["items"]
        assert answers[2]["status"] == 503
        priced = [answers[i] for i in (0, 1, 3)]
        assert all(a["quote_id"] and SPOOLED_WARNING in a["warnings"] for a in priced)
        assert len({a["quote_id"] for a in priced}) == 3
        services.database.engine = real_engine
        services.database.sessions.configure(bind=real_engine)
        deadline = time.monotonic() + 5
        while list(spool_dir.glob("*.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(spool_dir.glob("*.jsonl"))
        for answer in priced:
            stored = client.get(f"/v1/quotes/{answer['quote_id']}")
            assert stored.status_code == 200
            assert stored.json()["response"]["energy"] == answer["energy"]
            assert stored.json()["response"]["created_at"] == answer["created_at"]
