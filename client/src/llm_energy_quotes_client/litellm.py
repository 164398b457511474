"""A LiteLLM callback that quotes each request's GPU energy, latency and CO2e before it is sent.

In LiteLLM's `async_pre_call_deployment_hook` (the deployment, hence its GPUs, is chosen) the
request is quoted on the deployment the operator mapped (`litellm_deployments`); the quote's
id, energy and CO2e go into the request's metadata and, on the proxy, the response headers
(`x-energy-quote-id`, `x-energy-gpu-j`, `x-energy-co2e-g`). After the call, where the upstream
reported the GPU energy it measured (a response header), that is posted as the quote's
observation with the observed latency. The quote service failing, slow or away never fails
nor holds up the LLM call: each call to it is bounded by `timeout_s`, and any error is logged
and the request goes on unquoted.

Needs the `litellm` extra (`pip install 'llm-energy-quotes-client[litellm]'`). In the proxy's
config.yaml: `litellm_settings: {callbacks: ["llm_energy_quotes_client.litellm.energy_quotes"]}`
with the service's address in `QUOTES_URL` (docs/integrations/litellm.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from llm_energy_quotes_client.async_client import AsyncQuotesClient
from llm_energy_quotes_client.litellm_deployments import (
    DeploymentQuoting,
    deployment_id,
    deployment_quoting,
    estimate_request,
    load_deployments,
    metadata_bucket,
    output_tokens,
)
from llm_energy_quotes_client.models import Estimate
from llm_energy_quotes_client.retry_after import NO_RETRIES

logger = logging.getLogger(__name__)

METADATA_KEY = "energy_quote"
"""Where the quote's summary is put in the request's metadata."""
QUOTED_CALL_TYPES = frozenset(
    {"acompletion", "completion", "atext_completion", "text_completion", "aresponses", "responses"}
)
"""LiteLLM call types that generate tokens (embeddings, images... are not quoted)."""


def quote_summary(quote: Estimate) -> dict[str, Any]:
    """What the callback attaches of a quote: id, GPU energy [J] with its bounds, latency [s],
    CO2e [g] with its bounds."""
    return {
        "quote_id": quote.quote_id,
        "gpu_j": quote.energy.gpu_j,
        "gpu_j_low": quote.energy.gpu_j_low,
        "gpu_j_high": quote.energy.gpu_j_high,
        "total_s": quote.latency.total_s,
        "co2e_g": quote.carbon.total_g,
        "co2e_g_low": quote.carbon.total_g_low,
        "co2e_g_high": quote.carbon.total_g_high,
    }


def idempotency_key(call_id: str, deployment: str) -> str:
    """The quote's Idempotency-Key: the call and deployment, as the printable ASCII token of
    at most 200 characters the service accepts."""
    key = f"litellm-{call_id}-{deployment}"
    return "".join(c if "\x21" <= c <= "\x7e" else "_" for c in key)[:200]


def prompt_tokens_of(kwargs: Mapping[str, Any]) -> int:
    """The prompt's token count by LiteLLM's default tokenizer (tiktoken's cl100k_base, shipped
    with LiteLLM). Not the deployment's own tokenizer: LiteLLM fetches that from the Hugging
    Face Hub, which would hold the call up (or hang, offline). 4 characters a token where it
    cannot count (an unusual message shape)."""
    import litellm  # the extra; imported here so that a failure to count never fails a quote

    messages = kwargs.get("messages")
    text = kwargs.get("prompt") if messages is None else None
    try:
        if messages is not None:
            return int(litellm.token_counter(messages=messages))
        if isinstance(text, str):
            return int(litellm.token_counter(text=text))
    except Exception:  # LiteLLM's counter raises what its tokenizers raise
        logger.debug("energy quote: LiteLLM could not count the prompt", exc_info=True)
    return max(1, len(str(messages if messages is not None else text or "")) // 4)


class EnergyQuoteLogger(CustomLogger):  # type: ignore[misc]  # litellm is typed as Any here
    """Quotes each mapped deployment's requests before dispatch (see the module docstring).

    `quotes` sends to the service (give it a short `timeout_s`, no retries: a gateway must
    fail open); `deployments` maps deployments without an `energy_quote` in their model_info;
    `energy_header` is the upstream response header that carries measured GPU energy [J]."""

    def __init__(
        self,
        quotes: AsyncQuotesClient,
        *,
        deployments: Mapping[str, DeploymentQuoting] | None = None,
        timeout_s: float = 0.25,
        energy_header: str = "x-gpu-energy-j",
        remembered: int = 10_000,
    ) -> None:
        super().__init__()
        self.quotes = quotes
        self.deployments = dict(deployments or {})
        self.timeout_s = timeout_s
        self.energy_header = energy_header.lower()
        # Quotes by litellm_call_id, for the response-headers and success hooks, which may
        # not see the metadata the deployment hook wrote; bounded, oldest dropped first.
        self._by_call: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._remembered = remembered

    @classmethod
    def from_environment(cls) -> EnergyQuoteLogger:
        """Configured by QUOTES_URL (default http://127.0.0.1:8000), QUOTES_API_KEY,
        QUOTES_TIMEOUT_S (0.25), QUOTES_DEPLOYMENTS_FILE (a JSON mapping) and
        QUOTES_ENERGY_HEADER (x-gpu-energy-j)."""
        timeout_s = float(os.environ.get("QUOTES_TIMEOUT_S", "0.25"))
        quotes = AsyncQuotesClient(
            os.environ.get("QUOTES_URL", "http://127.0.0.1:8000"),
            api_key=os.environ.get("QUOTES_API_KEY") or None,
            timeout_s=timeout_s,
            retry=NO_RETRIES,
        )
        path = os.environ.get("QUOTES_DEPLOYMENTS_FILE")
        return cls(
            quotes,
            deployments=load_deployments(path) if path else None,
            timeout_s=timeout_s,
            energy_header=os.environ.get("QUOTES_ENERGY_HEADER", "x-gpu-energy-j"),
        )

    def quote_of_call(self, litellm_call_id: str | None) -> dict[str, Any] | None:
        """The summary attached to a call, if it was quoted (and is still remembered)."""
        return self._by_call.get(litellm_call_id) if litellm_call_id else None

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Quote the request on the chosen deployment; the kwargs come back with the quote in
        their metadata, or None (left as they are) when not mapped or the quote failed."""
        kind = getattr(call_type, "value", call_type)
        if kind is not None and kind not in QUOTED_CALL_TYPES:
            return None
        call_id = str(kwargs.get("litellm_call_id") or "")
        try:
            quoting = deployment_quoting(kwargs, self.deployments)
            if quoting is None:
                return None
            deployment = deployment_id(kwargs)
            body = estimate_request(
                quoting,
                prompt_tokens=prompt_tokens_of(kwargs),
                output_tokens=output_tokens(kwargs, quoting.output_tokens),
                metadata={"litellm_call_id": call_id, "deployment": deployment},
            )
            # Keyed by call and deployment: a retry on the same deployment gets the same
            # quote back; a fallback to another deployment is quoted anew.
            key = idempotency_key(call_id, deployment) if call_id else None
            quote = await asyncio.wait_for(
                self.quotes.estimate(body, idempotency_key=key), self.timeout_s
            )
        except Exception as error:  # fail open: the LLM call never waits on or fails for this
            logger.warning("energy quote skipped for call %s: %r", call_id or "?", error)
            return None
        summary = quote_summary(quote)
        bucket = metadata_bucket(kwargs)
        metadata = kwargs.get(bucket)
        if not isinstance(metadata, dict):
            metadata = kwargs[bucket] = {}
        metadata[METADATA_KEY] = summary
        if call_id:
            self._remember(call_id, summary)
        return kwargs

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, Any] | None = None,
    ) -> dict[str, str] | None:
        """The proxy's response headers: the quote's id, GPU energy [J] and CO2e [g]."""
        summary = self.quote_of_call(data.get("litellm_call_id"))
        if summary is None:
            return None
        headers = {"x-energy-gpu-j": f"{summary['gpu_j']:.6g}"}
        headers["x-energy-co2e-g"] = f"{summary['co2e_g']:.6g}"
        if summary["quote_id"] is not None:
            headers["x-energy-quote-id"] = str(summary["quote_id"])
        return headers

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """Post what the upstream measured (its energy header) as the quote's observation,
        with the observed latency; nothing when it reported no energy."""
        summary = self.quote_of_call(kwargs.get("litellm_call_id"))
        if summary is None or summary["quote_id"] is None:
            return
        hidden = getattr(response_obj, "_hidden_params", None) or {}
        headers = hidden.get("additional_headers") or {}
        reported = headers.get(f"llm_provider-{self.energy_header}")
        if reported is None:
            return
        try:
            body: dict[str, Any] = {
                "gpu_j": float(reported),
                "measured_with": "upstream",
                "measured_at": datetime.now(UTC).isoformat(),
            }
            if isinstance(start_time, datetime) and isinstance(end_time, datetime):
                body["total_s"] = max((end_time - start_time).total_seconds(), 1e-6)
            await asyncio.wait_for(
                self.quotes.post_observation(
                    summary["quote_id"], body, idempotency_key=kwargs.get("litellm_call_id")
                ),
                self.timeout_s,
            )
        except Exception as error:  # an observation lost is logged, never raised into LiteLLM
            logger.warning("energy observation not posted for %s: %r", summary["quote_id"], error)

    def _remember(self, call_id: str, summary: dict[str, Any]) -> None:
        self._by_call[call_id] = summary
        self._by_call.move_to_end(call_id)
        while len(self._by_call) > self._remembered:
            self._by_call.popitem(last=False)


energy_quotes = EnergyQuoteLogger.from_environment()
"""The instance a LiteLLM proxy config names: `llm_energy_quotes_client.litellm.energy_quotes`."""
