"""POST /v1/estimate with `serving.disaggregated` (prefill and decode on separate workers)."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import example_body
from fastapi.testclient import TestClient

WORKLOAD = {"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 200}


def body(prefill: dict[str, Any], count: int = 1) -> dict[str, Any]:
    return {
        **example_body(workload=WORKLOAD, hardware={"gpu": "H100-SXM5-80GB", "count": count}),
        "serving": {"concurrent_sequences": 32, "disaggregated": {"prefill": prefill}},
    }


def test_disaggregated_quote_adds_up_in_its_verbose_rows(client: TestClient) -> None:
    response = client.post(
        "/v1/estimate?verbose=true",
        json=body({"count": 8, "parallelism": {"tensor": 8}, "batch_size": 4}),
    )
    assert response.status_code == 200, response.text
    quote = response.json()
    energy, latency = quote["energy"], quote["latency"]
    rows = quote["breakdown"]["kernels"]
    for phase in ("prefill", "decode"):
        chosen = [r for r in rows if r["phase"] == phase]
        assert sum(r["gpu_j"] for r in chosen) == pytest.approx(energy[f"{phase}_gpu_j"])
        assert sum(r["time_s"] for r in chosen) == pytest.approx(latency[f"{phase}_s"])
    assert energy["prefill_gpu_j"] + energy["decode_gpu_j"] == pytest.approx(energy["gpu_j"])
    # Llama-3.1-8B's 1,000-token prompt: 131,072,000 B of bf16 KV; 8 + 1 GPUs exceed one
    # 8-GPU NVLink domain, so it crosses the network.
    (moved,) = [r for r in rows if r["kind"] == "kv_transfer"]
    assert moved["kernel"] == "kv_transfer (inter-node network)"
    assert moved["network_bytes"] == pytest.approx(131_072_000.0)
    assert quote["gpu_count"] == 9
    assert any("inter-node network" in w for w in quote["warnings"])


def test_a_prefill_worker_in_the_same_nvlink_domain_says_so(client: TestClient) -> None:
    response = client.post("/v1/estimate", json=body({"count": 2}, count=2))
    assert response.status_code == 200, response.text
    assert any("over the nvlink" in w for w in response.json()["warnings"])


def test_prefill_parallelism_not_multiplying_to_its_count_is_refused(client: TestClient) -> None:
    response = client.post("/v1/estimate", json=body({"count": 8, "parallelism": {"tensor": 4}}))
    assert response.status_code == 422, response.text
    problem = response.json()
    (error,) = problem["errors"]
    assert error["loc"].endswith("serving.disaggregated.prefill"), error
    assert "serving.disaggregated.prefill.parallelism" in error["msg"]
    assert "serving.disaggregated.prefill.count = 8" in error["msg"]


def test_prefill_worker_layout_the_model_cannot_split_is_refused(client: TestClient) -> None:
    # Llama-3.1-8B's 8 KV heads do not split over 3 GPUs.
    response = client.post("/v1/estimate", json=body({"count": 3}))
    assert response.status_code == 422, response.text
    assert "serving.disaggregated.prefill" in response.text


@pytest.mark.parametrize("bad", [{"count": 0}, {"batch_size": 0}, {"count": 1, "extra": 1}])
def test_bad_prefill_worker_fields_are_refused(client: TestClient, bad: dict[str, Any]) -> None:
    response = client.post("/v1/estimate", json=body(bad))
    assert response.status_code == 422, response.text
