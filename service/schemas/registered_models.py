"""The body of POST /v1/models: a tenant's own model from its config.json."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from service.schemas.common import example
from service.schemas.estimate_request import DTypeName, HfConfigIn

REPO_ID_PATTERN = r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$"


class RegisterModelIn(BaseModel):
    """`id` (a Hugging Face style repo id, `org/name`) names the model in estimates of this
    tenant; `weights` is the weights' precision, by default the config's published one."""

    model_config = example(
        {
            "id": "acme/llama-ft",
            "config": {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
                "max_position_embeddings": 131072,
                "torch_dtype": "bfloat16",
            },
            "weights": "bf16",
        }
    )

    id: Annotated[str, Field(min_length=3, max_length=200, pattern=REPO_ID_PATTERN)]
    config: HfConfigIn
    weights: DTypeName | None = None
