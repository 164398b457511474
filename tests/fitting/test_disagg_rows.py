"""aiconfigurator's disaggregated runs read as `serving.disaggregated` requests, never fitted on."""

from __future__ import annotations

import pytest

from offline.fitting.silicon_rows import disaggregated_request, unpriceable

# A TensorRT-LLM run of the sample's shape: 576 clients over 9 decode workers of 8 GPUs
# (attention data-parallel 8, experts over 8), 1 prefill worker of 8 GPUs (tensor 8).
ROW = {
    "silicon_data_source": "db-dump/2026-04-27; config_id=303; silicon_concurrency=576",
    "backend": "trtllm",
    "model_path": "deepseek-ai/DeepSeek-R1",
    "system": "h200_sxm",
    "precision": "fp8",
    "mode": "disagg",
    "isl": "1024",
    "osl": "1024",
    "prefill_batch_size": "1",
    "prefill_num_workers": "1",
    "prefill_tp_size": "8",
    "prefill_pp_size": "1",
    "prefill_attention_dp_size": "1",
    "prefill_moe_tp_size": "1",
    "prefill_moe_ep_size": "8",
    "decode_batch_size": "64",
    "decode_num_workers": "9",
    "decode_tp_size": "1",
    "decode_pp_size": "1",
    "decode_attention_dp_size": "8",
    "decode_moe_tp_size": "1",
    "decode_moe_ep_size": "8",
}


def test_a_disaggregated_run_is_one_request_on_its_decode_worker() -> None:
    request = disaggregated_request(ROW)
    assert request.workload.batch_size == 1
    assert (request.workload.prompt_tokens, request.workload.output_tokens) == (1024, 1024)
    assert request.hardware.gpu == "H200-SXM-141GB"
    assert request.hardware.count == 8  # tensor 1 x data 8
    assert request.hardware.parallelism is not None
    assert (request.hardware.parallelism.data, request.hardware.parallelism.expert) == (8, 8)
    serving = request.serving
    assert serving is not None and serving.engine == "trtllm"
    assert serving.concurrent_sequences == 64  # 576 clients over 9 decode workers
    assert serving.disaggregated is not None
    prefill = serving.disaggregated.prefill
    assert (prefill.count, prefill.batch_size) == (8, 1)
    assert prefill.parallelism is not None and prefill.parallelism.tensor == 8
    assert prefill.workers_per_decode_worker == pytest.approx(1 / 9)


def test_the_aggregated_reading_drops_only_the_prefill_worker() -> None:
    split, together = disaggregated_request(ROW), disaggregated_request(ROW, aggregated=True)
    assert together.serving is not None and together.serving.disaggregated is None
    assert together.hardware == split.hardware
    assert together.serving.concurrent_sequences == 64


def test_runs_without_worker_counts_take_one_of_each() -> None:
    row = {**ROW, "decode_num_workers": "", "prefill_num_workers": "", "prefill_batch_size": ""}
    serving = disaggregated_request(row).serving
    assert serving is not None and serving.concurrent_sequences == 576
    assert serving.disaggregated is not None
    assert serving.disaggregated.prefill.workers_per_decode_worker == 1


def test_disaggregated_runs_stay_out_of_every_fit() -> None:
    assert unpriceable(ROW) == "disaggregated serving"
