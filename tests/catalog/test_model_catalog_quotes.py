"""Every supported catalogue model is quoted: the request POST /v1/estimate takes, priced in
process through the service's one pricing path (Estimator.price, regressor included), on the
fewest H200s (1, 2, 4, 8 or 16) that hold it."""

from __future__ import annotations

import math

import orjson
import pytest

from service.catalog.models import load_model_catalog
from service.errors import ServiceError
from service.pricing.estimator import Estimator
from service.pricing.priced import PricedRequest
from service.pricing.regressor.runtime import EnergyRegressor
from service.schemas.estimate_request import EstimateRequest

SUPPORTED = [r.id for r in load_model_catalog().records if r.architecture is not None]
# 512 prompt tokens, fewer where the context is shorter (pythia-14m: 512 tokens in all)
PROMPT_TOKENS = {
    r.id: min(512, r.architecture.max_context_tokens - 64)
    for r in load_model_catalog().records
    if r.architecture is not None
}
COUNTS = (1, 2, 4, 8, 16)  # 16: two HGX nodes, for the bf16 GLM-5 family (744B)


def _request(model_id: str, count: int) -> EstimateRequest:
    return EstimateRequest.model_validate(
        {
            "model": model_id,
            "workload": {
                "batch_size": 1,
                "prompt_tokens": PROMPT_TOKENS[model_id],
                "output_tokens": 64,
            },
            "hardware": {"gpu": "H200-SXM-141GB", "count": count},
            "datacenter": {"region": "FR"},
        }
    )


@pytest.fixture(scope="module")
def quotes() -> dict[str, PricedRequest | ServiceError]:
    """Each model's quote on the fewest GPUs that price it (else its last refusal): one batch
    per GPU count, as the service prices a batch of requests."""
    estimator = Estimator.from_catalogues(regressor=EnergyRegressor.load())
    found: dict[str, PricedRequest | ServiceError] = {}
    pending = SUPPORTED
    for count in COUNTS:
        priced = estimator.price([_request(m, count) for m in pending])
        found |= dict(zip(pending, priced, strict=True))
        pending = [m for m, p in zip(pending, priced, strict=True) if isinstance(p, ServiceError)]
    return found


@pytest.mark.parametrize("model_id", SUPPORTED)
def test_every_supported_model_is_quoted(
    quotes: dict[str, PricedRequest | ServiceError], model_id: str
) -> None:
    quote = quotes[model_id]
    assert isinstance(quote, PricedRequest), quote
    document = orjson.loads(quote.document.text())
    assert document["energy"]["gpu_j"] > 0 and math.isfinite(document["energy"]["gpu_j"])
    assert document["latency"]["total_s"] > 0
