"""LFM2's gated short convolution (DeltaNetShape rule ``short_conv``), against counts worked by
hand.

One conv layer: hidden 64 (64 channels, each a head of one), conv_L_cache 3, bf16, 1 GPU.
- in_proj 64 -> B, C, x = 192: 2 x 64 x 192 = 24,576 FLOP per token; out_proj 2 x 64 x 64 =
  8,192. Weights 64 x 192 + 64 x 3 (conv) + 64 x 64 = 16,576.
- conv1d: B * x, 3 taps (2 ops each), C * y: 64 x (2 x 3 + 2) = 512 ops per token, no
  exponentials; reads B, C, x (3 x 64 x 2 B = 384 B) and writes y (128 B) per token.
- state per sequence: the last 2 inputs of 64 channels, 2 x 64 x 2 B = 256 B; no recurrent
  state. On 2 GPUs each holds 32 channels: 128 B.
"""

from __future__ import annotations

import pytest

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode, build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.memory import parameter_count
from service.core.mixers import DeltaNetShape
from service.core.recurrent import recurrent_state_bytes
from service.core.shards import shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision
from tests.core.core_support import catalog_gpu, estimate

SHORT_CONV = DeltaNetShape(64, 64, 1, 1, conv_kernel=3, rule="short_conv")
H100 = catalog_gpu("H100-SXM5-80GB")


def _arch() -> ModelArchitecture:
    """One short-conv layer and one attention layer."""
    return ModelArchitecture(
        hidden_size=64, num_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        intermediate_size=128, vocab_size=100, delta_net=SHORT_CONV, num_delta_net_layers=1,
    )  # fmt: skip


def _deployment(tensor: int = 1) -> Deployment:
    return Deployment(H100, Parallelism(tensor=tensor), Precision())


def _work(kind: str, operand: str, tokens: float, seqs: float) -> Work:
    arch = _arch()
    p = PassShape(tokens, seqs, seqs, {}, 1)
    return kernel_work(
        KernelNode(kind, kind, 1, operand), arch, shard_shapes(arch, _deployment()), p
    )


def test_projections_and_weights_by_hand() -> None:
    assert _work("gemm", "delta_net_in", 10, 1).tensor_flops == 10 * 24_576
    assert _work("gemm", "delta_net_out", 10, 1).tensor_flops == 10 * 8_192
    assert SHORT_CONV.weight_elements(64) == 16_576


def test_conv_by_hand() -> None:
    prefill = _work("causal_conv1d", "delta_net", 100, 2)
    assert prefill.cuda_core_ops == pytest.approx(100 * 512)
    assert prefill.special_function_ops == 0
    assert prefill.activation_read_bytes == pytest.approx(100 * 384)
    assert prefill.activation_write_bytes == pytest.approx(100 * 128)
    assert prefill.kv_cache_read_bytes == prefill.kv_cache_write_bytes == 2 * 256


def test_conv_state_replaces_the_kv_cache() -> None:
    arch = _arch()
    assert recurrent_state_bytes(arch, shard_shapes(arch, _deployment())) == 256
    assert recurrent_state_bytes(arch, shard_shapes(arch, _deployment(2))) == 128


def test_graph_has_the_conv_and_no_scan() -> None:
    graph = build_kernel_graph(_arch(), flash_attention=True, tensor_group=1, pipeline_stages=1)
    names = {n.name for n in graph.nodes}
    assert {"short_conv_in_proj", "short_conv_conv1d", "short_conv_out_proj"} <= names
    kinds = {n.kind for n in graph.nodes}
    assert not kinds & {"delta_rule", "ssd_scan", "gated_norm", "lightning_attention"}


def test_decode_cost_of_the_conv_does_not_grow_with_context() -> None:
    arch = _arch()
    short = estimate(arch, 2, 100, 11, _deployment())
    long = estimate(arch, 2, 100, 21, _deployment())
    convs = [{k.name: k for k in e.decode.kernels}["short_conv_conv1d"] for e in (short, long)]
    assert convs[1].time_s == pytest.approx(2 * convs[0].time_s)  # twice the steps, same cost


def test_parameter_count_adds_the_conv_layer() -> None:
    """Tables 2 x 100 x 64 = 12,800; one attention layer 64 x (64 + 2 x 64) + 64 x 64 =
    16,384; two SwiGLU MLPs 2 x 3 x 64 x 128 = 49,152; the conv layer 16,576."""
    assert parameter_count(_arch()) == 12_800 + 16_384 + 49_152 + 16_576
