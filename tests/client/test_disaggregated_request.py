"""The client's types for disaggregated serving match the service's: a body built with the
client's TypedDicts is one the service's own EstimateRequest takes, with the values it was given,
and the service's kv_transfer verbose row reads into the client's KernelRow."""

from __future__ import annotations

import json

import pytest
from llm_energy_quotes_client.models import Breakdown
from llm_energy_quotes_client.requests import Disaggregated, EstimateRequest, PrefillWorker
from pydantic import ValidationError

from service.schemas.estimate_request import EstimateRequest as ServiceEstimateRequest
from service.schemas.estimate_response import BreakdownOut, KernelRowOut

# A 2 x 2 (tensor x pipeline) prefill worker of 4 GPUs, 3 prompts a pass, one per two decode
# workers, beside a decode worker of 8 GPUs (tensor 2 x data 4).
PREFILL: PrefillWorker = {
    "count": 4,
    "parallelism": {"tensor": 2, "pipeline": 2},
    "batch_size": 3,
    "workers_per_decode_worker": 0.5,
}
BODY: EstimateRequest = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "workload": {"batch_size": 2, "prompt_tokens": 4096, "output_tokens": 200},
    "hardware": {"gpu": "H200-SXM-141GB", "count": 8, "parallelism": {"tensor": 2, "data": 4}},
    "serving": {
        "engine": "sglang",
        "concurrent_sequences": 48,
        "disaggregated": {"prefill": PREFILL},
    },
}


def service_reading(body: EstimateRequest) -> ServiceEstimateRequest:
    """The service's model of `body` as it arrives: JSON text, parsed as the API parses it."""
    return ServiceEstimateRequest.model_validate_json(json.dumps(body))


def test_a_disaggregated_body_validates_and_keeps_its_values() -> None:
    parsed = service_reading(BODY)
    assert parsed.serving is not None and parsed.serving.disaggregated is not None
    prefill = parsed.serving.disaggregated.prefill
    assert prefill.count == 4
    assert prefill.parallelism is not None
    assert (prefill.parallelism.tensor, prefill.parallelism.pipeline) == (2, 2)
    assert prefill.parallelism.data is None
    assert prefill.batch_size == 3
    assert prefill.workers_per_decode_worker == 0.5
    assert parsed.serving.concurrent_sequences == 48
    # What the service read is what the client wrote, field for field, nothing added.
    assert parsed.model_dump(mode="json", exclude_unset=True) == BODY


def test_an_empty_prefill_worker_takes_the_service_defaults() -> None:
    """Every PrefillWorker field is optional (total=False), as every one has a default."""
    disaggregated: Disaggregated = {"prefill": {}}
    body: EstimateRequest = {**BODY, "serving": {"disaggregated": disaggregated}}
    serving = service_reading(body).serving
    assert serving is not None and serving.disaggregated is not None
    prefill = serving.disaggregated.prefill
    assert (prefill.count, prefill.parallelism, prefill.batch_size) == (1, None, 1)
    assert prefill.workers_per_decode_worker == 1.0


def test_a_prefill_layout_that_is_not_its_count_is_refused_where_it_stands() -> None:
    body: EstimateRequest = {
        **BODY,
        "serving": {"disaggregated": {"prefill": {"count": 4, "parallelism": {"tensor": 3}}}},
    }
    with pytest.raises(ValidationError, match=r"serving\.disaggregated\.prefill\.parallelism"):
        service_reading(body)


def test_the_kv_transfer_row_reads_into_the_client_breakdown() -> None:
    row = KernelRowOut(
        phase="prefill",
        kernel="kv_transfer (nvlink)",
        kind="kv_transfer",
        executions=1,
        tensor_flops=0.0,
        cuda_core_ops=0.0,
        special_function_ops=0.0,
        memory_bytes=0.0,
        network_bytes=268435456.0,
        bound="network",
        compute_precision="none",
        time_s=0.0015,
        gpu_j=0.75,
        arithmetic_intensity_flops_per_byte=0.0,
        ridge_point_flops_per_byte=0.0,
    )
    sent = BreakdownOut(
        kernels=[row],
        defaulted_inputs={},
        weight_bytes_per_gpu=4.0e9,
        kv_cache_bytes_per_gpu=1.0e8,
        memory_capacity_bytes_per_gpu=1.41e11,
    )
    read = Breakdown.model_validate_json(sent.model_dump_json()).kernels[0]
    assert (read.phase, read.kernel, read.kind, read.bound) == (
        "prefill",
        "kv_transfer (nvlink)",
        "kv_transfer",
        "network",
    )
    assert (read.network_bytes, read.time_s, read.gpu_j) == (268435456.0, 0.0015, 0.75)
    # Typed members of the client's row, not unknown members kept in model_extra.
    assert read.model_extra is not None
    assert not {"kind", "network_bytes"} & read.model_extra.keys()
