"""POST /v1/estimate with `architecture` a model's published config.json: quoted as the catalogue
model it describes; what cannot be priced is a 422 naming the place in the body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_support import example_body
from fastapi.testclient import TestClient

from offline.catalog.vendored_configs import config_path
from tests.catalog.hf_config_support import NEMOTRON_NANO_9B_V2

# Published configs, with their sources (see tests/catalog/hf_config_support.py).
_FIXTURE = Path(__file__).resolve().parents[1] / "catalog/fixtures/catalogued_configs.json"
_CONFIGS = json.loads(_FIXTURE.read_text(encoding="utf-8"))["configs"]
GPT_OSS: dict[str, Any] = _CONFIGS["openai/gpt-oss-20b"]["config"]
GEMMA3: dict[str, Any] = _CONFIGS["google/gemma-3-27b-it"]["config"]
CHATGLM3: dict[str, Any] = json.loads(config_path("THUDM/chatglm3-6b").read_text("utf-8"))
HARDWARE = {"gpu": "H100-SXM5-80GB", "count": 1}


def _problem(client: TestClient, architecture: Any) -> dict[str, Any]:
    body = example_body(architecture=architecture, hardware=HARDWARE)
    del body["model"]
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    return problem


def test_a_config_is_quoted_as_its_catalogue_model(client: TestClient) -> None:
    by_name = client.post(
        "/v1/estimate", json=example_body(model="openai/gpt-oss-20b", hardware=HARDWARE)
    )
    body = example_body(architecture=GPT_OSS, hardware=HARDWARE)
    del body["model"]
    by_config = client.post("/v1/estimate", json=body, params={"verbose": "true"})
    assert by_name.status_code == by_config.status_code == 200, by_config.text
    named, configured = by_name.json(), by_config.json()
    assert configured["energy"] == named["energy"]
    assert configured["latency"] == named["latency"]
    assert configured["model"] == "custom"
    # weights default to the config's quantization_config (mxfp4), not bf16
    defaulted = configured["breakdown"]["defaulted_inputs"]
    assert defaulted["precision.weights"] == "mxfp4"
    # the published config states every key GptOssConfig reads: none defaulted
    assert not [name for name in defaulted if name.startswith("architecture.")]
    assert "attention sinks ignored" in configured["warnings"]


@pytest.mark.parametrize(
    ("architecture", "loc"),
    [
        ({**GPT_OSS, "num_local_experts": "32"}, "architecture.num_local_experts"),
        (
            {**GEMMA3, "text_config": {**GEMMA3["text_config"], "num_hidden_layers": 0}},
            "architecture.text_config.num_hidden_layers",
        ),
        ({**CHATGLM3, "quantization_bit": 4}, "architecture.quantization_bit"),
        ({**CHATGLM3, "multi_query_group_num": 3}, "architecture.multi_query_group_num"),
        ({"model_type": "internlm2", "bias": "no"}, "architecture.bias"),
        ({"model_type": "baichuan", "model_max_length": "4k"}, "architecture.model_max_length"),
        ({"model_type": "rwkv", "hidden_size": 4096}, "architecture.model_type"),
        ({"model_type": "not_a_model"}, "architecture.model_type"),
        ({"model_type": 7, "hidden_size": 4096}, "architecture.model_type"),  # schema
        ({"model_type": ""}, "architecture.model_type"),  # schema
    ],
)
def test_what_cannot_be_priced_is_422_naming_the_field(
    client: TestClient, architecture: dict[str, Any], loc: str
) -> None:
    problem = _problem(client, architecture)
    assert [e["loc"] for e in problem["errors"]] == [loc], problem


def test_the_custom_form_keeps_its_locations(client: TestClient) -> None:
    problem = _problem(client, {"hidden_size": 64, "num_layers": 2})
    assert {e["loc"] for e in problem["errors"]} == {
        "architecture.num_attention_heads",
        "architecture.intermediate_size",
        "architecture.vocab_size",
    }


def test_a_hybrid_mamba_config_is_quoted(client: TestClient) -> None:
    """Nemotron-Nano-9B-v2 is priced kernel by kernel; its cache per GPU is the keys and values
    of its 4 attention layers plus each sequence's states in its 27 Mamba-2 layers:
    8 x (4 x 768 x 2 x 8 x 128 x 2 B + 27 x (3 x 12288 + 128 x 80 x 128) x 2 B)."""
    body = example_body(architecture=NEMOTRON_NANO_9B_V2, hardware=HARDWARE)
    del body["model"]
    response = client.post("/v1/estimate", json=body, params={"verbose": "true"})
    assert response.status_code == 200, response.text
    quote = response.json()
    assert quote["energy"]["gpu_j"] > 0
    breakdown = quote["breakdown"]
    attention_kv = 4 * (512 + 256) * 2 * 8 * 128 * 2
    states = 27 * (3 * (128 * 80 + 2 * 8 * 128) + 128 * 80 * 128) * 2
    assert breakdown["kv_cache_bytes_per_gpu"] == pytest.approx(8 * (attention_kv + states))
    kinds = {k["kind"] for k in breakdown["kernels"]}
    assert {"causal_conv1d", "ssd_scan", "gated_norm"} <= kinds


def test_a_deepseek_v32_config_is_quoted_with_its_sparse_attention(client: TestClient) -> None:
    # DeepSeek-V3.2-Exp's config.json: DeepSeek-V3's with the indexer keys
    # (https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json)
    v3 = _CONFIGS["deepseek-ai/DeepSeek-V3"]["config"]
    v32 = {**v3, "model_type": "deepseek_v32", "index_n_heads": 64, "index_head_dim": 128}
    body = example_body(
        architecture={**v32, "index_topk": 2048},
        hardware={"gpu": "H200-SXM-141GB", "count": 8},
        workload={"batch_size": 1, "prompt_tokens": 32768, "output_tokens": 256},
    )
    del body["model"]
    sparse = client.post("/v1/estimate", json=body, params={"verbose": "true"})
    assert sparse.status_code == 200, sparse.text
    names = {k["kernel"] for k in sparse.json()["breakdown"]["kernels"]}
    assert {"dsa_indexer", "attention_sparse"} <= names


def test_a_kimi_linear_config_is_quoted_kernel_by_kernel(client: TestClient) -> None:
    """Kimi-Linear-48B-A3B's config.json on one H200: 7 MLA layers cache a 576-wide bf16 latent
    per token, its 20 KDA layers a state per sequence (conv 3 x 3 x 4,096 bf16, recurrent
    32 x 128 x 128 fp32): 8 x (7 x 768 x 576 x 2 B + 20 x (73,728 + 2,097,152) B)."""
    from tests.catalog.test_hf_config_linear_hybrids import KIMI_LINEAR_48B

    body = example_body(architecture=KIMI_LINEAR_48B, hardware={"gpu": "H200-SXM-141GB"})
    del body["model"]
    response = client.post("/v1/estimate", json=body, params={"verbose": "true"})
    assert response.status_code == 200, response.text
    breakdown = response.json()["breakdown"]
    per_sequence = 7 * 768 * 576 * 2 + 20 * (3 * 3 * 4096 * 2 + 32 * 128 * 128 * 4)
    assert breakdown["kv_cache_bytes_per_gpu"] == pytest.approx(8 * per_sequence)
    names = {k["kernel"] for k in breakdown["kernels"]}
    assert {"linear_attn_gate_proj", "linear_attn_delta_rule", "kv_b_proj"} <= names
