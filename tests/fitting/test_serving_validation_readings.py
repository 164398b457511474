"""The readings of one ML.ENERGY row that the serving validation report compares."""

from __future__ import annotations

from offline.fitting.datasets import EnergyMeasurement
from offline.fitting.serving_validation import READINGS
from service.core.workload import Workload

ROW = EnergyMeasurement(
    source="mlenergy-v3",
    category="llm_text_generation",
    task="lm-arena-chat",
    model_id="meta-llama/Llama-3.1-8B-Instruct",
    architecture="Dense Transformer",
    gpu_id="H100-SXM5-80GB",
    gpu_count=1,
    tensor_parallel=1,
    expert_parallel=1,
    pipeline_parallel=1,
    weights_precision="bf16",
    batch_size=511,
    max_batch_size=512,
    prompt_tokens=210,
    output_tokens=397,
    per_sequence_gpu_j=31.0,
    time_per_output_token_s=0.05,
    avg_power_w=690.0,
    row_ref="test:1",
)
FITTED = Workload(511, 210, 397)


def test_each_reading_of_the_511_sequence_row() -> None:
    got = {name: reading(ROW, FITTED) for name, reading in READINGS.items()}
    assert got == {
        "static, as fitted": (Workload(511, 210, 397), False),
        "static, README prompts": (Workload(511, 690, 397), True),
        "continuous": (Workload(1, 690, 397, concurrent_sequences=511), True),
        "continuous, history cached": (
            Workload(1, 690, 397, cached_prompt_tokens=480, concurrent_sequences=511),
            True,
        ),
    }
