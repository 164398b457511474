"""Quote documents are ASCII. One character outside Latin-1 (an em dash in a GPU's source, say)
makes Python hold the whole ~8 KB JSON text at two bytes a character, and storing it then costs
a UTF-8 re-encoding: about 7 % of the batch endpoint's instructions per item when the GPU
catalogue's sources still had em dashes (docs/history/2026-11-performance.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest

DATA_DIR = Path(__file__).resolve().parents[2] / "service" / "catalog" / "data"
WORKLOAD = {"batch_size": 2, "prompt_tokens": 300, "output_tokens": 40}
CUSTOM_MOE = {
    "hidden_size": 2048,
    "num_layers": 16,
    "num_attention_heads": 16,
    "intermediate_size": 5632,
    "vocab_size": 32000,
    "num_experts": 8,
    "experts_per_token": 2,
    "moe_intermediate_size": 1024,
}


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues()


@pytest.mark.parametrize("path", sorted(DATA_DIR.glob("*.json")), ids=lambda p: p.name)
def test_every_catalogue_file_is_ascii(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    outside = sorted({c for c in text if ord(c) > 127})
    assert outside == [], f"{path.name} has non-ASCII characters {outside}"


def _document(estimator: Estimator, body: dict[str, object], verbose: bool = False) -> str:
    request = EstimateRequest.model_validate({"workload": WORKLOAD, **body})
    return estimator.estimate(request, verbose=verbose).document.text()  # as answered


def test_a_quote_on_every_gpu_is_ascii(estimator: Estimator) -> None:
    for gpu in estimator.gpus.ids:
        body = {"model": "google/gemma-2-2b", "hardware": {"gpu": gpu, "count": 1}}
        assert _document(estimator, body).isascii(), gpu


def test_a_quote_in_every_region_is_ascii(estimator: Estimator) -> None:
    for record in estimator.regions.records:
        body = {
            "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "hardware": {"gpu": "H100-SXM5-80GB", "count": 2},
            "datacenter": {"region": record.code},
        }
        assert _document(estimator, body).isascii(), record.code


def test_a_verbose_quote_of_a_custom_architecture_is_ascii(estimator: Estimator) -> None:
    body = {"architecture": CUSTOM_MOE, "hardware": {"gpu": "A100-SXM4-80GB", "count": 1}}
    assert _document(estimator, body, verbose=True).isascii()
