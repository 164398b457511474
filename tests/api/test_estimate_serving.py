"""POST /v1/estimate with the serving-state fields: `serving.concurrent_sequences` and
`workload.cached_prompt_tokens` (open dev mode)."""

from __future__ import annotations

from typing import Any

from api_support import example_body
from fastapi.testclient import TestClient

WORKLOAD = {"batch_size": 1, "prompt_tokens": 690, "output_tokens": 397}


def body(**workload: Any) -> dict[str, Any]:
    return example_body(
        workload={**WORKLOAD, **workload}, hardware={"gpu": "H100-SXM5-80GB", "count": 1}
    )


def test_one_request_joining_511_running_sequences_is_quoted(client: TestClient) -> None:
    response = client.post(
        "/v1/estimate", json={**body(), "serving": {"concurrent_sequences": 511}}
    )
    assert response.status_code == 200, response.text
    joined = response.json()
    alone = client.post("/v1/estimate", json=body()).json()
    # Sharing every pass with 510 others costs less energy per sequence and more time per token.
    assert joined["energy"]["per_sequence_gpu_j"] < alone["energy"]["per_sequence_gpu_j"]
    assert (
        joined["latency"]["time_per_output_token_s"] > alone["latency"]["time_per_output_token_s"]
    )


def test_the_measured_ml_energy_row_is_quoted_under_each_engine(client: TestClient) -> None:
    # ML.ENERGY v3's Llama-3.1-8B row on one H100 (vLLM 0.11, bf16): one request joining 511
    # running sequences of 690 + 397 tokens. Each holds 690 + 396 / 2 = 888 tokens on average,
    # 131,072 B per token: 511 x 888 x 131,072 B = 55.4 GiB of KV cache beside 15 GiB of
    # weights, within the 80 GB: quoted (the static batch needed 82.8 GiB and was refused).
    for engine in ("vllm-v1", "vllm", "sglang", "trtllm"):
        payload = {
            **body(),
            "precision": {"weights": "bf16"},
            "serving": {"concurrent_sequences": 511, "engine": engine},
        }
        response = client.post("/v1/estimate", json=payload)
        assert response.status_code == 200, (engine, response.text)
        quote = response.json()
        assert not any("KV cache" in w for w in quote["warnings"]), quote["warnings"]
        # Its first token waits for the pass in progress, then the pass carrying its prompt.
        latency = quote["latency"]
        assert latency["prefill_s"] > 1.5 * latency["time_per_output_token_s"]


def test_a_static_batch_that_does_not_fit_at_once_is_quoted_with_a_warning(
    client: TestClient,
) -> None:
    response = client.post("/v1/estimate", json=body(batch_size=511))
    assert response.status_code == 200, response.text
    assert any("2 waves" in w for w in response.json()["warnings"])


def test_cached_tokens_lower_the_prefill_energy(client: TestClient) -> None:
    hit = client.post("/v1/estimate", json=body(cached_prompt_tokens=600)).json()
    miss = client.post("/v1/estimate", json=body()).json()
    assert hit["energy"]["prefill_gpu_j"] < miss["energy"]["prefill_gpu_j"]
    assert hit["latency"]["prefill_s"] < miss["latency"]["prefill_s"]


def test_out_of_range_serving_state_is_422_naming_the_field(client: TestClient) -> None:
    cases = [
        (body(cached_prompt_tokens=691), "workload.cached_prompt_tokens"),
        (body(cached_prompt_tokens=-1), "workload.cached_prompt_tokens"),
        (
            {**body(batch_size=8), "serving": {"concurrent_sequences": 7}},
            "serving.concurrent_sequences",
        ),
    ]
    for payload, loc in cases:
        response = client.post("/v1/estimate", json=payload)
        assert response.status_code == 422, response.text
        assert any(e["loc"].startswith(loc) for e in response.json()["errors"]), response.text
