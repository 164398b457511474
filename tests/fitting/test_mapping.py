"""How measured rows map onto the cost model's inputs: prefilled prompt tokens per task and the
host-overhead profile each source is fitted under."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from offline.fitting.energy_leaderboard import (
    PROMPT_TOKENS_BY_TASK,
    EnergyMeasurement,
    MlEnergySource,
)
from offline.fitting.request_inputs import (
    CACHED_PROMPT_TOKENS_BY_TASK,
    ENGINE_OF_SOURCE,
    SPLITWISE_HARNESS,
    mlenergy_inputs,
)
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import COEFFICIENTS_PATH, ENGINE_DESCRIPTIONS
from tests.fitting.test_serving_validation_readings import ROW

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
V3_CSV = DATA_DIR / "mlenergy-v3-h100" / "mlenergy_v3_h100_text.csv"


def test_prompt_tokens_per_task() -> None:
    # The data README's task means, as served (chat template included).
    assert PROMPT_TOKENS_BY_TASK == {
        "lm-arena-chat": 690,
        "gpqa": 250,
        "sourcegraph-fim": 1370,
        "chat": 130,
        "code": 130,
    }


def test_splitwise_has_its_own_profile_that_is_never_served() -> None:
    assert ENGINE_OF_SOURCE == {
        "mlenergy-v2": "vllm-v0",
        "mlenergy-v3": "vllm-v1",
        "splitwise": SPLITWISE_HARNESS,
    }
    document = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    served = {"vllm-v0", "vllm-v1", "vllm", "sglang", "trtllm"}
    # hf-transformers is described always, fitted once a measurement campaign is committed.
    assert set(ENGINE_DESCRIPTIONS) == served | {"hf-transformers"}
    assert served <= set(document["engines"]) <= set(ENGINE_DESCRIPTIONS)
    assert set(document["measurement_harnesses"]) == {SPLITWISE_HARNESS}


@pytest.mark.skipif(not V3_CSV.is_file(), reason="measured data not present")
def test_lm_arena_time_beyond_decode_steps_by_hand() -> None:
    # The evidence for the lm-arena-chat mapping, read from the CSV by hand: line 142,
    # Llama-3.1-8B-Instruct, 1x H100, max 768 sequences. Server time per request beyond its
    # decode steps = avg_output_len x (1 / output throughput - median ITL / avg batch).
    with V3_CSV.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    row = rows[142 - 2]
    assert (row["model_id"], row["task"]) == ("meta-llama/Llama-3.1-8B-Instruct", "lm-arena-chat")
    out, batch = float(row["avg_output_len"]), float(row["avg_batch_size"])
    throughput = float(row["output_throughput_tokens_per_sec"])
    itl_s = float(row["median_itl_ms"]) / 1e3
    beyond_decode_s = out * (1.0 / throughput - itl_s / batch)
    # 397.354 x (1 / 9602.77 - 0.0629310 / 690.868) = 397.354 x 1.3055e-5 s = 5.19 ms
    assert beyond_decode_s == pytest.approx(5.19e-3, rel=0.01)
    # 690 prompt tokens of an 8B model are >= 2 x 8.0e9 x 690 FLOP = 1.1e13 FLOP: 11 ms at the
    # H100's 989 TFLOP/s dense bf16 peak, more than the time the row leaves for prefill.
    assert beyond_decode_s < 2 * 8.0e9 * 690 / 989e12
    # The 690 - 480 = 210 tokens the mapping computes take >= 2 x 8.0e9 x 210 / 989e12 = 3.4 ms
    # at that peak: room for them (and the roofline's 0.3 x 690 tokens' prefill) is left.
    task = "lm-arena-chat"
    computed = PROMPT_TOKENS_BY_TASK[task] - CACHED_PROMPT_TOKENS_BY_TASK[task]
    assert computed == 210
    assert 2 * 8.0e9 * computed / 989e12 == pytest.approx(3.40e-3, rel=0.01)
    assert 2 * 8.0e9 * computed / 989e12 < beyond_decode_s


def test_only_lm_arena_chat_rows_carry_prefix_cache_hits() -> None:
    # Multi-turn chat resends its history (vLLM 0.11's prefix cache serves it); single-turn
    # gpqa and fill-in-the-middle prompts are new.
    assert CACHED_PROMPT_TOKENS_BY_TASK == {"lm-arena-chat": 480}
    models, gpus = load_model_catalog(), load_gpu_catalog()
    for task, cached in (("lm-arena-chat", 480), ("gpqa", 0)):
        row = replace(
            ROW,
            task=task,
            batch_size=64,
            max_batch_size=64,
            prompt_tokens=PROMPT_TOKENS_BY_TASK[task],
            output_tokens=400,
            per_sequence_gpu_j=50.0,
            time_per_output_token_s=0.012,
            avg_power_w=600.0,
        )
        inputs = mlenergy_inputs(row, models, gpus)
        assert not isinstance(inputs, str), inputs
        assert inputs.workload.prompt_tokens == PROMPT_TOKENS_BY_TASK[task]
        assert inputs.workload.cached_prompt_tokens == cached


@pytest.mark.parametrize(
    ("source", "model_id", "unfused"),
    [
        ("mlenergy-v2", "google/gemma-2-9b-it", True),  # vLLM 0.5.4: GemmaRMSNorm as torch ops
        ("mlenergy-v2", "google/codegemma-7b", True),
        ("mlenergy-v2", "meta-llama/Llama-3.1-8B-Instruct", False),  # fused rms_norm kernel
        ("mlenergy-v3", "google/gemma-3-12b-it", False),  # vLLM 0.11 compiles it
    ],
)
def test_rows_run_gemma_norms_unfused_only_under_vllm_0_5_4(
    source: MlEnergySource, model_id: str, unfused: bool
) -> None:
    row = EnergyMeasurement(
        source=source,
        category="llm_text_generation",
        task="chat" if source == "mlenergy-v2" else "lm-arena-chat",
        model_id=model_id,
        architecture=None,
        gpu_id="H100-SXM5-80GB",
        gpu_count=1,
        tensor_parallel=1,
        expert_parallel=1,
        pipeline_parallel=1,
        weights_precision="bf16",
        batch_size=64,
        max_batch_size=64,
        prompt_tokens=130,
        output_tokens=100,
        per_sequence_gpu_j=100.0,
        time_per_output_token_s=0.05,
        avg_power_w=None,
        row_ref="synthetic:1",
    )
    inputs = mlenergy_inputs(row, load_model_catalog(), load_gpu_catalog())
    assert not isinstance(inputs, str), inputs
    assert inputs.deployment.unfused_norms is unfused
