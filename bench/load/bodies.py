"""Realistic, varied estimate requests: a gateway's mix of models, GPUs, batch and lengths."""

from __future__ import annotations

import json
import random
from typing import Any

MODELS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "google/gemma-2-9b-it",
    "microsoft/Phi-3-mini-4k-instruct",
)
GPUS = ("H100-SXM5-80GB", "A100-SXM4-80GB", "H200-SXM-141GB", "L40S", "A100-SXM4-40GB", "L4")
GPU_COUNTS = (1, 1, 2, 4, 8)
BATCH_SIZES = (1, 1, 2, 4, 8, 16, 32, 64)
REGIONS = (None, "US-CA", "FR", "DE", "WORLD")


def estimate_body(rng: random.Random, known_models: set[str]) -> dict[str, Any]:
    """One request as a gateway would send it (names limited to the served catalogue)."""
    models = [model for model in MODELS if model in known_models] or sorted(known_models)[:8]
    body: dict[str, Any] = {
        "model": rng.choice(models),
        "workload": {
            "batch_size": rng.choice(BATCH_SIZES),
            "prompt_tokens": int(rng.lognormvariate(6.5, 1.0)) + 1,  # median ~665 tokens
            "output_tokens": int(rng.lognormvariate(5.3, 0.8)) + 1,  # median ~200 tokens
        },
        "hardware": {"gpu": rng.choice(GPUS), "count": rng.choice(GPU_COUNTS)},
        "metadata": {"request_id": f"gw-{rng.getrandbits(48):012x}", "customer": "load-test"},
    }
    region = rng.choice(REGIONS)
    if region is not None:
        body["datacenter"] = {"region": region, "pue": round(rng.uniform(1.08, 1.5), 2)}
    return body


def encoded_post(path: str, body: dict[str, Any], host: str) -> bytes:
    """A complete HTTP/1.1 keep-alive POST, ready to write to a socket."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload
