"""POST /v1/estimate against the core called directly with the same inputs (open dev mode)."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import example_body
from fastapi.testclient import TestClient
from numpy.testing import assert_allclose

from service.catalog import (
    load_cost_model_coefficients,
    load_engine_coefficients,
    load_gpu_catalog,
    load_model_catalog,
)
from service.catalog.intervals import load_intervals
from service.core.architecture import ModelArchitecture, default_head_dim
from service.core.dtypes import DType
from service.core.estimate import estimate_request
from service.core.results import RequestEstimate
from service.core.workload import Deployment, Parallelism, Precision, Workload

RTOL = 1e-9


def core_estimate(
    arch: ModelArchitecture,
    *,
    gpu: str = "H100-SXM5-80GB",
    batch: int = 8,
    prompt: int = 512,
    output: int = 256,
    parallelism: Parallelism | None = None,
    precision: Precision | None = None,
    flash: bool = True,
) -> RequestEstimate:
    return estimate_request(
        arch,
        Workload(batch, prompt, output),
        Deployment(
            load_gpu_catalog().get(gpu).spec,
            parallelism or Parallelism(tensor=2),
            precision or Precision(),
            flash,
        ),
        load_cost_model_coefficients(),
    )


def llama8b() -> ModelArchitecture:
    return load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct").require_architecture()


def post(client: TestClient, body: dict[str, Any], **params: Any) -> dict[str, Any]:
    response = client.post("/v1/estimate", json=body, params=params)
    assert response.status_code == 200, response.text
    payload: dict[str, Any] = response.json()
    return payload


def test_energy_and_latency_match_the_core(client: TestClient) -> None:
    body = post(client, example_body())
    expected = core_estimate(llama8b())
    energy, latency = body["energy"], body["latency"]
    assert_allclose(energy["gpu_j"], expected.gpu_j, rtol=RTOL)
    assert_allclose(energy["prefill_gpu_j"], expected.prefill.gpu_j, rtol=RTOL)
    assert_allclose(energy["decode_gpu_j"], expected.decode.gpu_j, rtol=RTOL)
    assert_allclose(energy["per_sequence_gpu_j"] * 8, energy["gpu_j"], rtol=RTOL)
    assert_allclose(latency["total_s"], expected.total_s, rtol=RTOL)
    assert_allclose(latency["prefill_s"] + latency["decode_s"], latency["total_s"], rtol=RTOL)
    assert_allclose(latency["time_per_output_token_s"], expected.time_per_output_token_s)
    # Llama on H100, vllm-v1, bf16: fitted on in every respect, the family-held-out level.
    assert body["validation"]["level"] == "family"
    interval = load_intervals().interval("family", "energy")
    low, high = min(interval.lower_ratio, 1.0), max(interval.upper_ratio, 1.0)
    assert_allclose(energy["gpu_j_low"], low * expected.gpu_j, rtol=RTOL)
    assert_allclose(energy["gpu_j_high"], high * expected.gpu_j, rtol=RTOL)
    assert energy["gpu_j_low"] <= energy["gpu_j"] <= energy["gpu_j_high"]
    assert body["quote_id"].startswith("q_") and len(body["quote_id"]) == 28
    assert body["model_version"].startswith("roofline")
    assert load_cost_model_coefficients().version in body["model_version"]
    assert body["breakdown"] is None


def test_defaults_follow_published_precision_and_tensor_count(client: TestClient) -> None:
    model = "meta-llama/Llama-3.1-405B-Instruct-FP8"
    body = post(
        client,
        example_body(model=model, hardware={"gpu": "H200-SXM-141GB", "count": 8}),
        verbose="true",
    )
    arch = load_model_catalog().get(model).require_architecture()
    expected = core_estimate(
        arch,
        gpu="H200-SXM-141GB",
        parallelism=Parallelism(tensor=8),
        # a published FP8 checkpoint runs W8A8 on fp8 tensor cores (H200 has them)
        precision=Precision(weights=DType.FP8, activations=DType.FP8),
    )
    assert_allclose(body["energy"]["gpu_j"], expected.gpu_j, rtol=RTOL)
    defaulted = body["breakdown"]["defaulted_inputs"]
    assert defaulted["precision.weights"] == "fp8"
    assert defaulted["precision.activations"] == "fp8"
    assert defaulted["serving.engine"] == "vllm-v1"
    assert defaulted["hardware.parallelism"] == {"tensor": 8, "expert": 1, "pipeline": 1}
    assert defaulted["serving.flash_attention"] is True
    kernels = [k for k in body["breakdown"]["kernels"] if k["bound"] not in ("host", "learned")]
    assert len(kernels) == len(expected.prefill.kernels) + len(expected.decode.kernels)
    assert {k["phase"] for k in kernels} == {"prefill", "decode"}
    assert {
        "kernel",
        "tensor_flops",
        "memory_bytes",
        "network_bytes",
        "bound",
        "time_s",
        "gpu_j",
    } <= set(kernels[0])


def test_custom_architecture_without_head_dim(client: TestClient) -> None:
    architecture: dict[str, Any] = {
        "hidden_size": 2048,
        "num_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 8192,
        "vocab_size": 32000,
    }
    body = example_body(architecture=architecture)
    del body["model"]
    result = post(client, body, verbose="true")
    arch = ModelArchitecture(**architecture, head_dim=default_head_dim(2048, 16))
    assert_allclose(result["energy"]["gpu_j"], core_estimate(arch).gpu_j, rtol=RTOL)
    assert result["model"] == "custom"
    assert result["breakdown"]["defaulted_inputs"]["architecture.head_dim"] == 128


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"model": "meta-llama/Llama-3.1-8B-Instruc"}, "model"),
        ({"hardware": {"gpu": "H100-SXM", "count": 1}}, "hardware.gpu"),
        ({"datacenter": {"region": "FRA"}}, "datacenter.region"),
    ],
)
def test_unknown_names_are_422_with_near_matches(
    client: TestClient, change: dict[str, Any], loc: str
) -> None:
    response = client.post("/v1/estimate", json=example_body(**change))
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["errors"][0]["loc"] == loc
    assert problem["suggestions"], problem


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        (
            {"workload": {"batch_size": "8", "prompt_tokens": 512, "output_tokens": 4}},
            "workload.batch_size",
        ),
        (
            {"workload": {"batch_size": 4097, "prompt_tokens": 512, "output_tokens": 4}},
            "workload.batch_size",
        ),
        (
            {"workload": {"batch_size": 1, "prompt_tokens": 0, "output_tokens": 4}},
            "workload.prompt_tokens",
        ),
        (
            {"workload": {"batch_size": 1, "prompt_tokens": 131000, "output_tokens": 1000}},
            "workload.output_tokens",
        ),
        ({"hardware": {"gpu": "H100-SXM5-80GB", "count": 65}}, "hardware.count"),
        (
            {"hardware": {"gpu": "H100-SXM5-80GB", "count": 2, "parallelism": {"tensor": 4}}},
            "hardware",
        ),
        (
            {"hardware": {"gpu": "T4", "count": 1}, "model": "meta-llama/Llama-3.1-70B-Instruct"},
            "hardware.count",
        ),
        (
            {
                "hardware": {"gpu": "A100-SXM4-80GB", "count": 1},
                "precision": {"weights": "fp8", "activations": "fp8"},
            },
            "precision",
        ),
        ({"precision": {"weights": "fp7"}}, "precision.weights"),
        ({"model": "stepfun-ai/Step-3.7-Flash"}, "model"),  # catalogued, its model_type not read
        ({"colour": "blue"}, "colour"),
        ({"architecture": {"hidden_size": 64}}, "architecture.num_layers"),
        (
            {
                "architecture": {
                    "hidden_size": 64,
                    "num_layers": 2,
                    "num_attention_heads": 3,
                    "intermediate_size": 64,
                    "vocab_size": 100,
                }
            },
            "body",
        ),
    ],
)
def test_invalid_requests_are_422_naming_the_field(
    client: TestClient, change: dict[str, Any], loc: str
) -> None:
    response = client.post("/v1/estimate", json=example_body(**change))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert {"type", "title", "status", "detail", "errors"} <= set(problem)
    assert any(e["loc"].startswith(loc) for e in problem["errors"]), problem


def test_insufficient_memory_says_how_many_gpus(client: TestClient) -> None:
    body = example_body(model="meta-llama/Llama-3.1-70B-Instruct", hardware={"gpu": "T4"})
    problem = client.post("/v1/estimate", json=body).json()
    assert problem["required_gpu_count"] > 1


def test_gpu_without_bf16_defaults_to_fp16(client: TestClient) -> None:
    # T4 has no bf16 tensor cores: the bf16-published model is served in fp16.
    body = post(
        client,
        example_body(model="Qwen/Qwen3-0.6B", hardware={"gpu": "T4", "count": 1}),
        verbose="true",
    )
    defaulted = body["breakdown"]["defaulted_inputs"]
    assert defaulted["precision.activations"] == "fp16"
    assert defaulted["precision.kv_cache"] == "fp16"
    assert any("served in fp16" in w for w in body["warnings"])


def test_legacy_engine_uses_its_own_host_overheads(client: TestClient) -> None:
    engines = load_engine_coefficients()
    v0, v1 = engines["vllm-v0"].roofline, engines["vllm-v1"].roofline
    workload = {"batch_size": 64, "prompt_tokens": 128, "output_tokens": 65}
    bodies = {
        engine: post(client, example_body(workload=workload, serving={"engine": engine}))
        for engine in ("vllm-v0", "vllm-v1")
    }
    # Same kernels and roofline; a decode step differs by the host overhead per step (fixed,
    # per sequence, per worker beyond the first of the example's 2 GPUs) and by the per-kernel
    # decode cost times the kernel executions of one step.
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct").require_architecture()
    core = core_estimate(arch, batch=64, prompt=128, output=65)
    executions_per_step = sum(k.executions for k in core.decode.kernels) / 64
    expected = (
        v0.decode_step_overhead_s
        - v1.decode_step_overhead_s
        + 64 * (v0.decode_overhead_per_sequence_s - v1.decode_overhead_per_sequence_s)
        + (2 - 1) * (v0.decode_overhead_per_worker_s - v1.decode_overhead_per_worker_s)
        + executions_per_step * (v0.decode_kernel_launch_s - v1.decode_kernel_launch_s)
    )
    tpot = {e: b["latency"]["time_per_output_token_s"] for e, b in bodies.items()}
    assert_allclose(tpot["vllm-v0"] - tpot["vllm-v1"], expected, rtol=1e-6)


def test_deepseek_v3_is_quoted_with_exact_mla(client: TestClient) -> None:
    body = example_body(
        model="deepseek-ai/DeepSeek-V3", hardware={"gpu": "H200-SXM-141GB", "count": 8}
    )
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200, response.text
    # MLA is priced phase by phase now: the approximation warning is gone (the catalogue's
    # note on the latent KV cache stays)
    warnings = response.json()["warnings"]
    assert not [w for w in warnings if "latent attention is approximated" in w]
    assert any(w.startswith("multi-head latent attention: KV cache holds") for w in warnings)
