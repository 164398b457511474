"""Requests and measured-looking rows for the regressor tests, built from the catalogues alone
(no ../shared/data needed), and paths to the committed model."""

from __future__ import annotations

import math
from pathlib import Path

from offline.fitting.datasets import EnergyMeasurement
from offline.fitting.request_inputs import RequestInputs, mlenergy_inputs
from offline.training.dataset import TrainingRow, training_row
from service.catalog import load_engine_coefficients, load_gpu_catalog, load_model_catalog

ROOT = Path(__file__).resolve().parents[2]
MODEL_PATH = ROOT / "models" / "energy_gnn.onnx"
METADATA_PATH = ROOT / "models" / "energy_gnn.json"
DATA_DIR = ROOT.parent / "shared" / "data"

# (model id, GPU, TP, EP, weights, batch, prompt, output): dense, MoE with EP, FP8, TP on A100.
CASES = (
    ("meta-llama/Llama-3.1-8B-Instruct", "H100-SXM5-80GB", 1, 1, "bf16", 64, 690, 400),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "H100-SXM5-80GB", 1, 4, "fp8", 32, 690, 860),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "A100-SXM4-40GB", 4, 1, "bf16", 128, 130, 250),
    ("google/gemma-2-2b-it", "A100-SXM4-40GB", 1, 1, "bf16", 200, 130, 300),
    ("openai/gpt-oss-20b", "H100-SXM5-80GB", 1, 1, "mxfp4", 96, 250, 2200),
    ("microsoft/Phi-3-mini-4k-instruct", "H100-SXM5-80GB", 1, 1, "bf16", 16, 130, 1),
    ("bigcode/starcoder2-7b", "H100-SXM5-80GB", 2, 1, "bf16", 48, 130, 120),
    ("codellama/CodeLlama-34b-hf", "A100-SXM4-40GB", 4, 1, "bf16", 24, 130, 500),
)


def measurement(
    case: tuple[str, str, int, int, str, int, int, int], index: int
) -> EnergyMeasurement:
    """An ML.ENERGY-shaped row for `case`; its energy is a made-up smooth function."""
    model_id, gpu, tp, ep, weights, batch, prompt, output = case
    v3 = ep > 1 or (gpu.startswith("H100") and index % 2 == 0)
    return EnergyMeasurement(
        source="mlenergy-v3" if v3 else "mlenergy-v2",
        category="llm_text_generation",
        task="lm-arena-chat" if v3 else "chat",
        model_id=model_id,
        architecture=None,
        gpu_id=gpu,
        gpu_count=tp * ep,
        tensor_parallel=1 if ep > 1 else tp,
        expert_parallel=ep,
        pipeline_parallel=1,
        weights_precision=weights,
        batch_size=batch,
        max_batch_size=batch,
        prompt_tokens=prompt,
        output_tokens=output,
        per_sequence_gpu_j=50.0 * math.log(batch + 1) * (1 + output / 100),
        time_per_output_token_s=0.02,
        avg_power_w=None,
        row_ref=f"synthetic:{index}",
    )


def measurements() -> list[EnergyMeasurement]:
    return [measurement(case, i) for i, case in enumerate(CASES)]


def request_inputs(m: EnergyMeasurement) -> RequestInputs:
    inputs = mlenergy_inputs(m, load_model_catalog(), load_gpu_catalog())
    assert not isinstance(inputs, str), inputs
    return inputs


def training_rows() -> list[TrainingRow]:
    """The training row of every synthetic measurement, with its engine's coefficients."""
    coefficients = load_engine_coefficients()
    rows = []
    for m in measurements():
        inputs = request_inputs(m)
        rows.append(training_row(m, inputs, coefficients[inputs.engine]))
    return rows


def engine_coefficients() -> dict[str, object]:
    return dict(load_engine_coefficients())
