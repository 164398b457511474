"""The two readings of one ML.ENERGY row that the serving validation report compares: the
continuous one the fit and the service use, and the old static one."""

from __future__ import annotations

from offline.fitting.datasets import EnergyMeasurement
from offline.fitting.request_inputs import mlenergy_inputs
from service.catalog import load_gpu_catalog, load_model_catalog
from service.core.workload import Workload
from service.pricing.continuous_energy import static_reading

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
    prompt_tokens=690,
    output_tokens=397,
    per_sequence_gpu_j=31.0,
    time_per_output_token_s=0.05,
    avg_power_w=690.0,
    row_ref="test:1",
)


def test_each_reading_of_the_511_sequence_row() -> None:
    inputs = mlenergy_inputs(ROW, load_model_catalog(), load_gpu_catalog())
    assert not isinstance(inputs, str), inputs
    # One request joining round(avg batch) = 511 running sequences (data README), 480 of
    # its 690 lm-arena-chat prompt tokens prefix-cache hits ...
    assert inputs.workload == Workload(
        1, 690, 397, cached_prompt_tokens=480, concurrent_sequences=511
    )
    # ... and the old reading: a static batch of those 511 sequences alone.
    assert static_reading(inputs.workload) == Workload(511, 690, 397, 480)
