"""POST /v1/estimate with `serving.engine`/`engine_version` and the parallelism forms
(tensor x data x pipeline = count with `expert` inside; the older tensor x expert x pipeline)."""

from __future__ import annotations

from typing import Any

from api_support import example_body
from fastapi.testclient import TestClient

QWEN3_30B = "Qwen/Qwen3-30B-A3B"
WORKLOAD = {"batch_size": 1, "prompt_tokens": 512, "output_tokens": 64}


def body(parallelism: dict[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    hardware: dict[str, Any] = {"gpu": "H100-SXM5-80GB", "count": 4}
    if parallelism is not None:
        hardware["parallelism"] = parallelism
    return {**example_body(workload=WORKLOAD, hardware=hardware), "model": QWEN3_30B, **extra}


def test_attention_data_parallelism_is_quoted(client: TestClient) -> None:
    dp = client.post("/v1/estimate?verbose=true", json=body({"tensor": 1, "data": 4, "expert": 4}))
    assert dp.status_code == 200, dp.text
    older = client.post("/v1/estimate?verbose=true", json=body({"tensor": 1, "expert": 4}))
    assert older.status_code == 200, older.text
    names = {row["kernel"] for row in dp.json()["breakdown"]["kernels"]}
    assert {"moe_dispatch", "moe_combine"} <= names
    assert "attn_all_reduce" not in names  # one GPU per attention replica
    # Tensor-parallel attention: every GPU holds every token, the MoE output is all-reduced
    # and no token moves all-to-all (as the engines run it without attention DP).
    older_names = {row["kernel"] for row in older.json()["breakdown"]["kernels"]}
    assert not {"moe_dispatch", "moe_combine"} & older_names
    assert "mlp_all_reduce" in older_names


def test_the_newer_form_without_data_is_tensor_times_pipeline(client: TestClient) -> None:
    # tensor 4, expert 4 on 4 GPUs: tensor x pipeline = count, the experts spread over all 4.
    newer = client.post("/v1/estimate", json=body({"tensor": 4, "expert": 4}))
    older = client.post("/v1/estimate", json=body({"tensor": 1, "expert": 4}))
    assert newer.status_code == older.status_code == 200, newer.text
    assert newer.json()["latency"]["total_s"] == older.json()["latency"]["total_s"]


def test_degrees_that_do_not_multiply_to_count_are_refused(client: TestClient) -> None:
    response = client.post("/v1/estimate", json=body({"tensor": 2, "data": 4, "expert": 4}))
    assert response.status_code == 422
    assert "tensor x data x pipeline = 8 must equal count = 4" in response.text
    response = client.post("/v1/estimate", json=body({"tensor": 2, "data": 2, "expert": 8}))
    assert response.status_code == 422
    assert "parallelism.expert = 8 must divide tensor x data = 4" in response.text


def test_an_unmeasured_engine_version_is_quoted_with_a_warning(client: TestClient) -> None:
    response = client.post(
        "/v1/estimate", json=body(serving={"engine": "sglang", "engine_version": "0.3.0"})
    )
    assert response.status_code == 200, response.text
    quote = response.json()
    assert any("no measurements of sglang 0.3.0" in w for w in quote["warnings"])
    assert quote["validation"]["engine"]["value"] == "sglang==0.3.0"
