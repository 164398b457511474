"""The LiteLLM callback with the real LiteLLM (skipped where the client's `litellm` extra is not
installed; CI runs it in a venv of its own): a Router routes to a localhost OpenAI-compatible
upstream while the quote service runs over HTTP. The request is quoted on the mapped
deployment before dispatch, the quote is stored with the call's id, the upstream's measured
energy lands as its observation, and a service that is away or silent fails nothing."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

# LiteLLM's price table ships with it; fetching the newest copy is not what is tested.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from litellm_support import UPSTREAM_ENERGY_J, quote_service, serving, upstream  # noqa: E402
from llm_energy_quotes_client import NO_RETRIES, AsyncQuotesClient, QuotesClient  # noqa: E402
from llm_energy_quotes_client.litellm import EnergyQuoteLogger  # noqa: E402

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
