"""The measurement harness's observations reach the service only against quotes asked for and
priced as the engine it measures (hf-transformers), through the real app."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from offline.measure.plan import PlannedConfiguration, harness_request
from offline.measure.run import ServicePoster, WrongEngine


def record(request: dict[str, Any]) -> dict[str, Any]:
    return {
        "configuration_id": "c1",
        "request": request,
        "observation": {
            "gpu_j": 812.0,
            "total_s": 3.1,
            "measured_with": "nvml-total-energy (offline.measure)",
            "measured_at": "2026-11-26T18:00:00+00:00",
        },
    }


def planned(**serving: str) -> PlannedConfiguration:
    request = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 4, "prompt_tokens": 128, "output_tokens": 16},
        "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
        **({"serving": serving} if serving else {}),
    }
    return PlannedConfiguration("c1", request["model"], 0, 4, 128, 16, "H100-SXM5-80GB", 2, request)


def test_an_hf_transformers_observation_is_posted_on_its_own_quote(client: TestClient) -> None:
    request = harness_request(planned(), "2.13.0")
    assert isinstance(request, dict)
    quote_id = ServicePoster("", None, client=client).post(record(request))
    stored = client.get(f"/v1/quotes/{quote_id}").json()
    assert stored["response"]["validation"]["engine"]["value"] == "hf-transformers==2.13.0"
    assert any("no fitted profile of hf-transformers" in w for w in stored["response"]["warnings"])
    assert [o["gpu_j"] for o in stored["observations"]] == [812.0]


@pytest.mark.parametrize("engine", ["vllm", None])
def test_another_engines_request_is_never_quoted_or_posted(
    client: TestClient, engine: str | None
) -> None:
    before = client.get("/v1/quotes").json()
    request = planned(engine="vllm").request if engine else planned().request  # no engine: vLLM
    with pytest.raises(WrongEngine):
        ServicePoster("", None, client=client).post(record(request))
    assert client.get("/v1/quotes").json() == before  # nothing quoted, nothing stored
