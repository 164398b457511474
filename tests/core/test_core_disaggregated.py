"""Disaggregated serving: the KV hand-off, decode-only passes, TTFT = prefill + transfer.

KV by hand, Llama-3.1-8B (32 layers, 8 KV heads of 128, bf16 cache): 32 x 2 x 8 x 128 x 2 B =
131,072 B per token, so a 1,000-token prompt is 131,072,000 B. On a GPU written out here with
450 GB/s NVLink in domains of 8 GPUs, 50 GB/s of network per GPU and 81 W idle:
- prefill on 1 GPU, decode on 1 (2 <= 8, one domain): NVLink, 131,072,000 / 450e9 =
  2.912711e-4 s, 81 W x that = 0.023593 J;
- prefill tensor-parallel over 8, decode over 8 (16 > 8): the network; each of the 8 senders
  holds 1 KV head, 16,384,000 B, 16,384,000 / 50e9 = 3.2768e-4 s; 131,072,000 B on the wire;
  8 x 81 W x 3.2768e-4 s = 0.21233664 J;
- an fp8 cache halves the bytes and the time.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.testing import assert_allclose

from service.core.decode_worker import decode_worker_mix
from service.core.disaggregated import (
    PrefillWorker,
    prefill_pass,
    with_prefill_workers,
)
from service.core.dtypes import DType
from service.core.estimate import estimate_contexts, estimate_request, pricing_context
from service.core.kv_transfer import NETWORK, NVLINK, kv_transfer
from service.core.steady_state import pass_mix
from service.core.workload import Precision, Workload
from tests.core.core_support import (
    IDEAL,
    ONE_LAYER_DENSE,
    REALISTIC,
    catalog_arch,
    catalog_gpu,
    column_sum,
    deployment,
)

GPU = dataclasses.replace(
    catalog_gpu("H100-SXM5-80GB"),
    interconnect_bandwidth_bytes_per_s=450e9,
    scale_out_bandwidth_bytes_per_s=50e9,
    interconnect_domain_gpus=8,
    idle_w=81.0,
)
LLAMA_8B = catalog_arch("meta-llama/Llama-3.1-8B-Instruct")
PROMPT_BYTES = 131_072_000.0


def test_kv_transfer_within_one_nvlink_domain() -> None:
    one = deployment(GPU)
    moved = kv_transfer(LLAMA_8B, one, one, 1, 1000)
    assert moved.link == NVLINK
    assert moved.senders == 1
    assert_allclose(moved.bytes, PROMPT_BYTES)
    assert_allclose(moved.time_s, 2.912711e-4, rtol=1e-6)
    assert_allclose(moved.gpu_j, 0.023593, rtol=1e-4)


def test_kv_transfer_between_domains_runs_on_the_network() -> None:
    eight = deployment(GPU, tensor=8)
    moved = kv_transfer(LLAMA_8B, eight, eight, 1, 1000)
    assert moved.link == NETWORK
    assert moved.senders == 8
    assert_allclose(moved.bytes_per_gpu, 16_384_000.0)
    assert_allclose(moved.bytes, PROMPT_BYTES)
    assert_allclose(moved.time_s, 3.2768e-4)
    assert_allclose(moved.gpu_j, 0.21233664)


def test_kv_transfer_scales_with_cache_precision_and_prompts() -> None:
    fp8 = deployment(GPU, precision=Precision(DType.BF16, DType.BF16, DType.FP8))
    moved = kv_transfer(LLAMA_8B, fp8, fp8, 2, 1000)
    assert_allclose(moved.bytes, PROMPT_BYTES)  # two prompts at half the bytes each
    assert_allclose(moved.time_s, 2.912711e-4, rtol=1e-6)


def test_decode_worker_pass_carries_no_prompt_tokens() -> None:
    """C = 10 running, O = 5: the aggregated mean pass carries 2 prompts beside 8 decoding
    sequences; the decode worker's, none, and all 10 decode (the request's share 1 / 10)."""
    one = np.array([1.0])
    args = (one, np.array([100.0]), np.array([0.0]), np.array([5.0]), np.array([10.0]))
    aggregated = pass_mix(*args, np.array([True]), 8192.0)
    assert_allclose(aggregated.prefilling[1], [2.0])
    static = pass_mix(*args, np.array([False]), 8192.0)
    mix = decode_worker_mix(static, one, np.array([10.0]), np.array([True]))
    assert_allclose(mix.prefilling[1], [0.0])
    assert_allclose(mix.decoding[1], [10.0])
    assert_allclose(mix.share[1], [0.1])
    assert_allclose(mix.steps[1], [4.0])


def test_decode_only_is_a_tenth_of_a_static_batch_of_the_running_ten() -> None:
    """The decode worker's passes are those of a static batch of the 10 running sequences
    (no prompt, contexts over 101 ... 104): same time, a tenth of the counts and energy."""
    h100 = deployment(GPU)
    alone = Workload(1, 100, 5, concurrent_sequences=10, decode_only=True)
    split = estimate_request(ONE_LAYER_DENSE, alone, h100, REALISTIC)
    static = estimate_request(ONE_LAYER_DENSE, Workload(10, 100, 5), h100, REALISTIC)
    assert_allclose(split.decode.time_s, static.decode.time_s, rtol=1e-12)
    assert_allclose(split.decode.gpu_j, static.decode.gpu_j / 10, rtol=1e-12)
    for field in ("tensor_flops", "kv_cache_read_bytes", "kv_cache_write_bytes"):
        assert_allclose(
            column_sum(split.decode, field), column_sum(static.decode, field) / 10, rtol=1e-12
        )
    # one token of 4 passes: 4 x 33,554,432 FLOPs in the layer's GEMMs
    gemms = {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    assert_allclose(column_sum(split.decode, "tensor_flops", gemms), 4 * 2 * 16_777_216)


def test_ttft_is_the_prefill_pass_plus_the_transfer_and_energy_adds_up() -> None:
    """A decode worker running only the request's sequence: no prefill queue."""
    decode = deployment(GPU)
    worker = PrefillWorker(deployment(GPU, tensor=8), batch_size=4)
    request = Workload(1, 1000, 50, decode_only=True)
    estimates, errors = estimate_contexts(
        [(pricing_context(LLAMA_8B, decode, REALISTIC), [request])]
    )
    assert not errors
    split, refused = with_prefill_workers(estimates, {0: (request, worker)})
    assert not refused
    pass_alone = estimate_request(
        LLAMA_8B, prefill_pass(request, worker), worker.deployment, REALISTIC
    )
    assert prefill_pass(request, worker) == Workload(4, 1000, 1)
    moved = kv_transfer(LLAMA_8B, worker.deployment, decode, 1, 1000)
    assert moved.link == NETWORK  # 8 + 1 GPUs > one domain of 8
    item = split.item(0)
    assert_allclose(item.prefill.time_s, pass_alone.prefill.time_s + moved.time_s)
    assert_allclose(item.prefill.gpu_j, pass_alone.prefill.gpu_j / 4 + moved.gpu_j)
    # the decode phase is the decode worker's, untouched
    assert_allclose(item.decode.time_s, estimates.item(0).decode.time_s)
    assert_allclose(item.gpu_j, item.prefill.gpu_j + item.decode.gpu_j)
    assert item.gpu_count == 9
    assert item.kv_transfer == moved
    # the prefill kernels carry the request's quarter of the pass
    assert_allclose(item.prefill.table.kernel_gpu_j, pass_alone.prefill.table.kernel_gpu_j / 4)
    assert_allclose(
        column_sum(item.prefill, "tensor_flops"),
        column_sum(pass_alone.prefill, "tensor_flops") / 4,
    )


def test_prefill_worker_that_cannot_hold_the_model_is_refused_naming_it() -> None:
    decode = deployment(GPU, tensor=2)
    worker = PrefillWorker(deployment(GPU, tensor=3))  # 8 KV heads do not split over 3
    request = Workload(1, 100, 10, decode_only=True)
    estimates, _ = estimate_contexts([(pricing_context(LLAMA_8B, decode, IDEAL), [request])])
    _, refused = with_prefill_workers(estimates, {0: (request, worker)})
    assert refused[0].field is not None
    assert refused[0].field.startswith("serving.disaggregated.prefill")


def test_joining_a_running_server_adds_the_prefill_queue_wait() -> None:
    """C = 64 running on the decode worker, O = 50, prefill passes of t_p s carrying B = 2
    prompts, r = 8 prefill workers per decode worker: prompts arrive at 64 / (t_p + 49 t_d)
    per s, rho = that x t_p / (2 x 8), the M/D/1 wait rho / (2 (1 - rho)) x t_p."""
    decode = deployment(GPU)
    worker = PrefillWorker(deployment(GPU), batch_size=2, workers_per_decode_worker=8.0)
    request = Workload(1, 1000, 50, concurrent_sequences=64, decode_only=True)
    estimates, _ = estimate_contexts([(pricing_context(LLAMA_8B, decode, REALISTIC), [request])])
    split, _ = with_prefill_workers(estimates, {0: (request, worker)})
    t_p = estimate_request(LLAMA_8B, Workload(2, 1000, 1), decode, REALISTIC).prefill.time_s
    t_d = estimates.item(0).time_per_output_token_s
    rho = 64 / (t_p + 49 * t_d) * t_p / (2 * 8.0)
    assert 0.05 < rho < 0.9  # a real wait, below the cap
    wait = rho / (2 * (1 - rho)) * t_p
    moved = kv_transfer(LLAMA_8B, worker.deployment, decode, 1, 1000)
    assert moved.link == NVLINK  # 1 + 1 GPUs in one domain
    assert_allclose(split.item(0).prefill.time_s, t_p + wait + moved.time_s)
    # the wait is time, not energy
    assert_allclose(split.item(0).prefill.gpu_j, (
        estimate_request(LLAMA_8B, Workload(2, 1000, 1), decode, REALISTIC).prefill.gpu_j / 2
        + moved.gpu_j
    ))  # fmt: skip
