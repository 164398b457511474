"""POST /v1/estimate/batch answers each item exactly as POST /v1/estimate answers it alone, with
the learned regressor on and off: items of several models and layouts priced together, errors
(unknown name, memory, a layout the model cannot take, a bad body) in place, every priced item
stored under its quote id."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from api_support import (
    count_quotes,
    example_body,
    running_client,
    services_of,
    take_database_away,
)

from service.quoting import SPOOLED_WARNING

LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"
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
VOLATILE = {"quote_id", "created_at"}


def assert_same(batch: Any, single: Any, path: str, rtol: float) -> None:
    """Equal JSON values, floats to `rtol` (quote ids and timestamps aside)."""
    if isinstance(single, dict):
        assert isinstance(batch, dict) and set(batch) == set(single), path
        for key, value in single.items():
            if key not in VOLATILE:
                assert_same(batch[key], value, f"{path}.{key}", rtol)
    elif isinstance(single, list):
        assert isinstance(batch, list) and len(batch) == len(single), path
        for i, (b, s) in enumerate(zip(batch, single, strict=True)):
            assert_same(b, s, f"{path}[{i}]", rtol)
    elif isinstance(single, float) and not isinstance(single, bool):
        assert math.isclose(batch, single, rel_tol=rtol, abs_tol=0.0), (path, batch, single)
    else:
        assert batch == single, (path, batch, single)


@pytest.mark.parametrize(("use_regressor", "rtol"), [(False, 1e-9), (True, 1e-5)])
@pytest.mark.parametrize("verbose", [False, True])
def test_batch_items_equal_single_estimates(
    database_url: str, use_regressor: bool, rtol: float, verbose: bool
) -> None:
    body = [{k: v for k, v in item.items() if v is not None} for item in ITEMS]
    params = {"verbose": "true"} if verbose else {}
    with running_client(database_url, use_regressor=use_regressor) as client:
        before = count_quotes(database_url, tenant="dev")
        response = client.post("/v1/estimate/batch", json={"items": body}, params=params)
        assert response.status_code == 200
        answers = response.json()["items"]
        assert len(answers) == len(body)
        priced = 0
        for item, answer in zip(body, answers, strict=True):
            alone = client.post("/v1/estimate", json=item, params=params)
            single = alone.json()
            if alone.status_code != 200:  # the same problem, in place
                assert answer["status"] == alone.status_code
                for key, value in single.items():
                    assert answer[key] == value, key
                continue
            priced += 1
            assert answer["quote_id"] and answer["quote_id"] != single["quote_id"]
            assert_same(answer, single, "item", rtol)
            stored = client.get(f"/v1/quotes/{answer['quote_id']}")
            assert stored.status_code == 200
            assert stored.json()["response"]["energy"] == answer["energy"]
        assert priced == 8
        # Every priced item of the batch and of the single requests was stored once.
        assert count_quotes(database_url, tenant="dev") == before + 2 * priced
        statuses = [a.get("status") for a in answers]
        assert statuses[5:9] == [422, 422, 422, 422]


def test_batch_spooled_while_the_database_is_away_keeps_every_quote(
    database_url: str, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    items = [ITEMS[0], ITEMS[2], ITEMS[5], ITEMS[3]]  # the third names an unknown GPU
    with running_client(database_url, spool_dir=spool_dir, spool_replay_interval_s=0.2) as client:
        services = services_of(client)
        real_engine = services.database.engine
        take_database_away(client)
        answers = client.post("/v1/estimate/batch", json={"items": items}).json()["items"]
        assert answers[2]["status"] == 422
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
