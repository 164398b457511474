"""Loaders for ../shared/data: row counts, hand-read rows, unit conversions, GPU ids."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
if not DATA_DIR.is_dir():
    pytest.skip(f"measured data not present at {DATA_DIR}", allow_module_level=True)

from offline.fitting.datasets import (  # noqa: E402  (import only once the data is known present)
    KNOWN_GPU_IDS,
    CollectiveTimeMeasurement,
    EnergyMeasurement,
    KernelTimeMeasurement,
    PhaseTimeMeasurement,
    data_source_csvs,
    data_source_digests,
    load_azure_trace,
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
    read_mlenergy,
)

PROJECT_GPU_IDS = {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB"}


def _csv_rows(relative: str) -> list[dict[str, str]]:
    # Independent of the loaders: plain csv over the file.
    with (DATA_DIR / relative).open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def mlenergy() -> list[EnergyMeasurement]:
    return load_mlenergy(DATA_DIR)


@pytest.fixture(scope="module")
def splitwise() -> list[PhaseTimeMeasurement]:
    return load_splitwise(DATA_DIR)


@pytest.fixture(scope="module")
def kernels() -> list[KernelTimeMeasurement]:
    return load_vidur_kernels(DATA_DIR)


@pytest.fixture(scope="module")
def collectives() -> list[CollectiveTimeMeasurement]:
    return load_vidur_collectives(DATA_DIR)


def test_mlenergy_counts_and_skips(mlenergy: list[EnergyMeasurement]) -> None:
    v2 = _csv_rows("mlenergy-v2/mlenergy_v2_llm_configs.csv")
    v3 = _csv_rows("mlenergy-v3-h100/mlenergy_v3_h100_text.csv")
    dp = [row for row in v3 if int(row["data_parallel"]) > 1]
    assert len(mlenergy) == len(v2) + len(v3) - len(dp)
    assert len(read_mlenergy(DATA_DIR).skipped) == len(dp)
    assert sum(m.source == "mlenergy-v2" for m in mlenergy) == len(v2) == 356
    multimodal = [m for m in mlenergy if m.category == "mllm_text_generation"]
    assert len(multimodal) == 42 and all(m.source == "mlenergy-v2" for m in multimodal)


def test_mlenergy_v2_rows_by_hand(mlenergy: list[EnergyMeasurement]) -> None:
    by_ref = {m.row_ref: m for m in mlenergy}
    # mlenergy-v2/mlenergy_v2_llm_configs.csv line 2: gemma-2-27b-it, chat, A100 40GB, bs128+tp4
    m = by_ref["mlenergy-v2/mlenergy_v2_llm_configs.csv:2"]
    assert (m.model_id, m.task, m.gpu_id) == ("google/gemma-2-27b-it", "chat", "A100-SXM4-40GB")
    assert (m.gpu_count, m.tensor_parallel, m.pipeline_parallel, m.expert_parallel) == (4, 4, 1, 1)
    assert (m.batch_size, m.max_batch_size, m.output_tokens) == (128, 128, 392)  # 127.72, 392.47
    assert m.prompt_tokens == 130 and m.weights_precision == "bf16" and m.avg_power_w is None
    assert m.per_sequence_gpu_j == pytest.approx(230.644433524673)
    assert m.time_per_output_token_s == pytest.approx(0.11220224938943191)  # already seconds
    # line 68: Mixtral-8x22B on A100 40GB, TP8 x PP2 -> 16 GPUs, Max BS 2048 (file name says 1024)
    m = by_ref["mlenergy-v2/mlenergy_v2_llm_configs.csv:68"]
    assert (m.gpu_count, m.tensor_parallel, m.pipeline_parallel) == (16, 8, 2)
    assert (m.batch_size, m.max_batch_size) == (1994, 2048)  # Avg BS 1993.92


def test_mlenergy_v3_rows_by_hand(mlenergy: list[EnergyMeasurement]) -> None:
    by_ref = {m.row_ref: m for m in mlenergy}
    # mlenergy-v3-h100/mlenergy_v3_h100_text.csv line 2: gpqa, Qwen/Qwen3-14B, 1x H100, max 8
    m = by_ref["mlenergy-v3-h100/mlenergy_v3_h100_text.csv:2"]
    assert (m.source, m.task, m.model_id, m.gpu_id) == (
        "mlenergy-v3",
        "gpqa",
        "Qwen/Qwen3-14B",
        "H100-SXM5-80GB",
    )
    assert (m.gpu_count, m.batch_size, m.max_batch_size, m.output_tokens) == (1, 8, 8, 6930)
    assert m.prompt_tokens == 250 and m.weights_precision == "bf16"
    assert m.per_sequence_gpu_j == pytest.approx(6057.803040527457)
    assert m.time_per_output_token_s == pytest.approx(14.42334707826376e-3)  # ms -> s
    assert m.avg_power_w == pytest.approx(483.6227004443375)
    precisions = {(m.model_id, m.weights_precision) for m in mlenergy}
    assert ("openai/gpt-oss-120b", "mxfp4") in precisions
    assert ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "fp8") in precisions


def test_splitwise_aggregates_repeats(splitwise: list[PhaseTimeMeasurement]) -> None:
    rows = _csv_rows("splitwise/perf_model.csv")
    keys = {
        (
            r["model"],
            r["hardware"],
            r["tensor_parallel"],
            r["batch_size"],
            r["prompt_size"],
            r["token_size"],
        )
        for r in rows
    }
    assert len(splitwise) == len(keys) == 228
    assert sum(m.source_rows for m in splitwise) == len(rows) == 1260
    assert {m.repeats for m in splitwise} == {5}
    # splitwise/perf_model.csv lines 2-6 (repeated verbatim at 92-96 and 142-146): llama2-70b,
    # a100-80gb, TP2, batch 1, prompt 512, 128 tokens. Medians of the 5 distinct repeats, in ms.
    m = splitwise[0]
    assert (m.model_id, m.gpu_id, m.tensor_parallel) == (
        "meta-llama/Llama-2-70b-hf",
        "A100-SXM4-80GB",
        2,
    )
    assert (m.batch_size, m.prompt_tokens, m.output_tokens) == (1, 512, 128)
    assert (m.repeats, m.source_rows, m.power_capped) == (5, 15, False)
    assert m.prefill_s == pytest.approx(196.86237908899784e-3)  # line 5
    assert m.decode_step_s == pytest.approx(54.85629275859165e-3)  # line 3: ~50 ms, so ms
    assert m.e2e_s == pytest.approx(7165.2703285217285e-3)
    assert m.e2e_ratio == pytest.approx(1.0, abs=0.01)
    capped = [m for m in splitwise if m.power_capped]
    assert len(capped) == 76 and {m.gpu_id for m in capped} == {"H100-SXM5-80GB"}
    assert {m.model_id for m in splitwise} == {"meta-llama/Llama-2-70b-hf", "bigscience/bloom"}


def test_vidur_kernels(kernels: list[KernelTimeMeasurement]) -> None:
    files = [p for p in data_source_csvs(DATA_DIR) if p.endswith("/mlp.csv")]
    expected = 0
    for relative in files:
        rows = _csv_rows(relative)
        ops = {c.split(".")[1] for c in rows[0] if c.startswith("time_stats.")}
        expected += len(rows) * len(ops)
    assert len(kernels) == expected
    # vidur/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv line 2: 4096 tokens, TP1
    by_key = {(k.row_ref, k.vidur_op): k for k in kernels}
    ref = "vidur/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv:2"
    up = by_key[(ref, "mlp_up_proj")]
    assert (up.model_id, up.gpu_id, up.kernel) == (
        "meta-llama/Llama-2-7b-hf",
        "A100-SXM4-80GB",
        "gate_up_proj",
    )
    assert (up.num_tokens, up.tensor_parallel, up.n_embd, up.n_expanded_embd) == (
        4096,
        1,
        4096,
        11008,
    )
    assert (up.n_head, up.n_kv_head, up.vocab_size, up.use_gated_mlp) == (32, 32, 32768, True)
    assert up.time_s == pytest.approx(3.3655e-3)  # ms -> s
    assert up.time_std_s == pytest.approx(0.12552429047797878e-3)
    assert by_key[(ref, "add")].time_s == pytest.approx(0.055e-3)
    assert by_key[(ref, "add")].kernel == "residual_add"
    # phi-2 has an ungated MLP and no post-attention norm
    phi = [k for k in kernels if k.model_id == "microsoft/phi-2"]
    assert {k.kernel for k in phi if k.vidur_op == "mlp_up_proj"} == {"up_proj"}
    assert "post_attn_norm" not in {k.kernel for k in phi}


def test_vidur_collectives(collectives: list[CollectiveTimeMeasurement]) -> None:
    files = [p for p in data_source_csvs(DATA_DIR) if "/network/" in p]
    assert len(files) == 8
    assert len(collectives) == sum(len(_csv_rows(p)) for p in files)
    # vidur/profiling/network/a100_dgx/all_reduce.csv line 2: 2 workers, 1 per node, 2048 bytes
    c = next(
        c for c in collectives if c.row_ref == "vidur/profiling/network/a100_dgx/all_reduce.csv:2"
    )
    assert (c.topology, c.collective, c.gpu_id) == ("a100_dgx", "all_reduce", "A100-SXM4-80GB")
    assert (c.num_workers, c.devices_per_node, c.max_devices_per_node) == (2, 1, 8)
    assert c.size_bytes == 2048 and c.time_s == pytest.approx(0.043e-3)  # ms -> s


def test_every_gpu_id_is_a_project_id(
    mlenergy: list[EnergyMeasurement],
    splitwise: list[PhaseTimeMeasurement],
    kernels: list[KernelTimeMeasurement],
    collectives: list[CollectiveTimeMeasurement],
) -> None:
    assert KNOWN_GPU_IDS == PROJECT_GPU_IDS
    seen = {m.gpu_id for m in mlenergy} | {m.gpu_id for m in splitwise}
    seen |= {k.gpu_id for k in kernels} | {c.gpu_id for c in collectives}
    assert seen == PROJECT_GPU_IDS


def test_azure_trace() -> None:
    context, generated = load_azure_trace(DATA_DIR, "code")
    assert len(context) == len(generated) == 8819
    # AzureLLMInferenceTrace_code.csv line 2: 4808 context tokens, 10 generated
    assert (int(context[0]), int(generated[0])) == (4808, 10)
    context, generated = load_azure_trace(DATA_DIR, "conversation")
    assert len(context) == len(generated) == 19366
    assert context.dtype.kind == "i" and int(generated.min()) > 0


def test_digests_and_missing_dir(tmp_path: Path) -> None:
    digests = data_source_digests(DATA_DIR)
    assert len(digests) == 27 and all(len(v) == 64 for v in digests.values())
    assert "splitwise/perf_model.csv" in digests
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_splitwise(tmp_path / "nowhere")
