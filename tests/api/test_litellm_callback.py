"""The LiteLLM callback with the real LiteLLM (skipped where the client's `litellm` extra is not
installed; CI runs it in a venv of its own): a Router routes to a localhost OpenAI-compatible
upstream while the quote service runs over HTTP. The request is quoted on the mapped
deployment before dispatch, the quote is stored with the call's id, the upstream's measured
energy lands as its observation, and a service that is away or silent fails nothing."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# LiteLLM's price table ships with it; fetching the newest copy is not what is tested.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from litellm_support import (  # noqa: E402
    UPSTREAM_ENERGY_J,
    litellm_proxy,
    quote_service,
    serving,
    upstream,
)
from llm_energy_quotes_client import NO_RETRIES, AsyncQuotesClient, QuotesClient  # noqa: E402
from llm_energy_quotes_client.litellm import EnergyQuoteLogger, idempotency_key  # noqa: E402

MAPPING = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM5-80GB", "count": 2}
QUESTION = [{"role": "user", "content": "What is the capital of France? One word."}]


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with serving(upstream()) as url:
        yield url


@pytest.fixture(scope="module")
def service_url(database_url: str) -> Iterator[str]:
    with quote_service(database_url) as url:
        yield url


def router(upstream_url: str) -> Any:
    deployment = {
        "model_name": "llama-8b",
        "litellm_params": {
            "model": "openai/meta-llama/Llama-3.1-8B-Instruct",
            "api_base": f"{upstream_url}/v1",
            "api_key": "unused",
        },
        "model_info": {"id": "llama-h100x2", "energy_quote": {**MAPPING, "region": "FR"}},
    }
    return litellm.Router(model_list=[deployment])


async def complete_with(logger: EnergyQuoteLogger, upstream_url: str, call_id: str) -> Any:
    litellm.callbacks = [logger]
    try:
        return await router(upstream_url).acompletion(
            model="llama-8b", messages=QUESTION, max_tokens=64, litellm_call_id=call_id
        )
    finally:
        await asyncio.sleep(0.5)  # LiteLLM's success logging runs after the answer
        litellm.callbacks = []


def test_the_real_base_class_and_hook_signatures() -> None:
    from litellm.integrations.custom_logger import CustomLogger

    assert issubclass(EnergyQuoteLogger, CustomLogger)
    for hook in (
        "async_pre_call_deployment_hook",
        "async_post_call_response_headers_hook",
        "async_log_success_event",
    ):
        ours = getattr(EnergyQuoteLogger, hook).__code__
        theirs = getattr(CustomLogger, hook).__code__
        names = theirs.co_varnames[: theirs.co_argcount]
        assert ours.co_varnames[: ours.co_argcount] == names, hook


def test_idempotency_keys_are_tokens_the_service_takes() -> None:
    assert idempotency_key("c1", "llama-h100x2") == "litellm-c1-llama-h100x2"
    assert idempotency_key("c1", "openai/llama 8b\u00e9") == "litellm-c1-openai/llama_8b_"
    assert len(idempotency_key("c" * 300, "d")) == 200


@pytest.mark.asyncio
async def test_a_routed_request_is_quoted_before_dispatch_and_observed(
    upstream_url: str, service_url: str
) -> None:
    quotes = AsyncQuotesClient(service_url, timeout_s=5.0, retry=NO_RETRIES)
    logger = EnergyQuoteLogger(quotes, timeout_s=5.0)
    response = await complete_with(logger, upstream_url, "call-quoted-1")
    assert response.choices[0].message.content == "Paris."
    summary = logger.quote_of_call("call-quoted-1")
    assert summary is not None and summary["quote_id"] is not None

    blocking = QuotesClient(service_url)
    stored = blocking.quote(summary["quote_id"])
    asked = stored.request
    assert asked["model"] == MAPPING["model"]
    assert asked["hardware"] == {"gpu": "H100-SXM5-80GB", "count": 2}
    assert asked["datacenter"] == {"region": "FR"}
    assert asked["workload"]["batch_size"] == 1 and asked["workload"]["output_tokens"] == 64
    assert asked["workload"]["prompt_tokens"] == 17  # the question in LiteLLM's default tokenizer
    assert asked["metadata"] == {"litellm_call_id": "call-quoted-1", "deployment": "llama-h100x2"}
    assert stored.response["energy"]["gpu_j"] == pytest.approx(summary["gpu_j"], rel=1e-12)
    assert stored.response["carbon"]["total_g"] == pytest.approx(summary["co2e_g"], rel=1e-12)
    headers = await logger.async_post_call_response_headers_hook(
        {"litellm_call_id": "call-quoted-1"}, None, response
    )
    assert headers is not None and headers["x-energy-quote-id"] == summary["quote_id"]
    assert float(headers["x-energy-gpu-j"]) == pytest.approx(summary["gpu_j"], rel=1e-5)

    deadline = time.monotonic() + 10
    while not (observations := blocking.quote(summary["quote_id"]).observations):
        assert time.monotonic() < deadline, "the upstream's energy was not observed"
        await asyncio.sleep(0.1)
    (observed,) = observations
    assert observed.gpu_j == UPSTREAM_ENERGY_J and observed.measured_with == "upstream"
    assert observed.total_s is not None and 0 < observed.total_s < 10
    await quotes.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("away", ["refused", "silent"])
async def test_the_call_goes_on_when_the_service_is_away(upstream_url: str, away: str) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        if away == "refused":
            listener.close()
        quotes = AsyncQuotesClient(f"http://127.0.0.1:{port}", timeout_s=0.2, retry=NO_RETRIES)
        logger = EnergyQuoteLogger(quotes, timeout_s=0.2)
        started = time.monotonic()
        response = await complete_with(logger, upstream_url, f"call-{away}")
        elapsed_s = time.monotonic() - started - 0.5  # less the wait for success logging
    assert response.choices[0].message.content == "Paris."
    assert logger.quote_of_call(f"call-{away}") is None
    assert elapsed_s < 3.0
    await quotes.aclose()


PROXY_CONFIG = """
model_list:
  - model_name: llama-8b
    litellm_params:
      model: openai/meta-llama/Llama-3.1-8B-Instruct
      api_base: {upstream}/v1
      api_key: unused
    model_info:
      id: llama-h100x2
      energy_quote: {{model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM5-80GB, count: 2}}
litellm_settings:
  callbacks: ["llm_energy_quotes_client.litellm.energy_quotes"]
"""


@pytest.mark.slow
def test_the_proxy_answers_with_the_quote_in_its_headers(
    upstream_url: str, service_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(PROXY_CONFIG.format(upstream=upstream_url))
    master_key = "sk-" + secrets.token_hex(32)  # the proxy refuses to start without one
    env = {
        "QUOTES_URL": service_url,
        "QUOTES_TIMEOUT_S": "5",
        "LITELLM_MASTER_KEY": master_key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    with litellm_proxy(config, env, tmp_path / "litellm.log") as proxy_url:
        answer = httpx.post(
            f"{proxy_url}/v1/chat/completions",
            json={"model": "llama-8b", "messages": QUESTION, "max_tokens": 48},
            headers={"Authorization": f"Bearer {master_key}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Paris."
        quote_id = answer.headers["x-energy-quote-id"]
        blocking = QuotesClient(service_url)
        stored = blocking.quote(quote_id)
        assert stored.request["workload"] == {
            "batch_size": 1,
            "prompt_tokens": 17,
            "output_tokens": 48,
        }
        assert stored.request["metadata"]["deployment"] == "llama-h100x2"
        call_id = answer.headers.get("x-litellm-call-id")
        assert call_id is None or stored.request["metadata"]["litellm_call_id"] == call_id
        assert float(answer.headers["x-energy-gpu-j"]) == pytest.approx(
            stored.response["energy"]["gpu_j"], rel=1e-5
        )
        assert float(answer.headers["x-energy-co2e-g"]) == pytest.approx(
            stored.response["carbon"]["total_g"], rel=1e-5
        )
        deadline = time.monotonic() + 20
        while not (observations := blocking.quote(quote_id).observations):
            assert time.monotonic() < deadline, "the upstream's energy was not observed"
            time.sleep(0.2)
        assert [o.gpu_j for o in observations] == [UPSTREAM_ENERGY_J]
