"""DeepSeek-V3.2's config.json (model_type deepseek_v32): DeepSeek-V3's layers plus DSA's
indexer shapes."""

from __future__ import annotations

import dataclasses

from hf_config_support import catalogued_configs

from service.catalog.hf_config import read_config
from service.core.architecture import DsaShape


def test_deepseek_v32_config_reads_the_indexer() -> None:
    # DeepSeek-V3.2-Exp's config.json is DeepSeek-V3's with model_type deepseek_v32 and the
    # indexer keys (https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json)
    v3 = catalogued_configs()["deepseek-ai/DeepSeek-V3"]
    raw = {
        **v3,
        "model_type": "deepseek_v32",
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 2048,
    }
    read = read_config(raw)
    assert read.architecture.dsa == DsaShape(64, 128, 2048)
    assert read.architecture.capped_window == 2048
    assert read.architecture == dataclasses.replace(
        read_config(v3).architecture, dsa=DsaShape(64, 128, 2048)
    )
