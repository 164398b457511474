"""Kimi Delta Attention and MiniMax's lightning attention, against counts worked by hand.

KDA layer: hidden 64, 2 heads of 16 (dk = dv = 16), conv 4, chunk 48, bf16, fp32 state, 1 GPU.
- q, k, v: 3 x 2 x 16 = 96 conv channels; in_proj = 96 + beta 2 + f_a 16 + g_a 16 = 130 wide:
  2 x 64 x 130 = 16,640 FLOP per token; f_b and g_b (16 -> 32 each): 2 x 16 x 64 = 2,048;
  out_proj 2 x 32 x 64 = 4,096. Weights: 64 x 130 + 16 x 64 + 96 x 4 + 32 x 64 = 11,776.
- delta rule: 2 heads x (3 C dk + 2 C dv + 3 dk dv + C^2 / 3) = 2 x (2,304 + 1,536 + 768 + 768)
  = 10,752 MAC = 21,504 tensor FLOP per token; CUDA-core ops per token 2 x (2 x 48 + 6 x 16)
  = 384, the per-channel gate's 6 x 32 = 192 and the gated intra-chunk products
  3 x 2 x 16 x 32 = 3,072: 3,648; a decode update 7 x 2 x 16 x 16 = 3,584 ops per sequence;
  exps per token 2 x (48 + 2) + 4 x 32 + 2 x 16 x 32 = 1,252.
- state per sequence: conv 3 x 96 x 2 B = 576 B; recurrent 2 x 16 x 16 x 4 B = 2,048 B.

Lightning layer: hidden 64, 2 heads of 16, block 32, fp32 state, no conv.
- in_proj = q, k, v 96 + output gate 32 = 128: 2 x 64 x 128 = 16,384 FLOP per token;
  weights 64 x 128 + 32 x 64 = 10,240.
- lightning: 2 x (2 x 32 x 16 + 2 x 16 x 16) = 3,072 MAC = 6,144 FLOP per token; CUDA-core ops
  SiLU 4 x 96 + decay mask 2 x 2 x 32 = 512 per token, the decode update 5 x 512 = 2,560 per
  sequence; reads per token 96 x 2 B + block states 2 x 256 x 4 B / 32 = 256 B.
"""

from __future__ import annotations

import pytest

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode, build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.memory import parameter_count
from service.core.mixers import DeltaNetShape
from service.core.plan import cost_plan
from service.core.recurrent import recurrent_state_bytes
from service.core.shards import shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision
from tests.core.core_support import IDEAL, catalog_gpu, estimate

KDA = DeltaNetShape(2, 2, 16, 16, conv_kernel=4, chunk_size=48, state_fp32=True, rule="kda")
LIGHTNING = DeltaNetShape(2, 2, 16, 16, conv_kernel=0, chunk_size=32, state_fp32=True,
                          rule="lightning")  # fmt: skip
H100 = catalog_gpu("H100-SXM5-80GB")


def _arch(shape: DeltaNetShape) -> ModelArchitecture:
    """One linear-attention layer and nothing else that carries weights but the tables."""
    return ModelArchitecture(
        hidden_size=64, num_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        intermediate_size=128, vocab_size=100, delta_net=shape, num_delta_net_layers=1,
    )  # fmt: skip


def _deployment(tensor: int = 1) -> Deployment:
    return Deployment(H100, Parallelism(tensor=tensor), Precision())


def _work(kind: str, operand: str, shape: DeltaNetShape, tokens: float, seqs: float) -> Work:
    arch = _arch(shape)
    p = PassShape(tokens, seqs, seqs, {}, 1)
    return kernel_work(
        KernelNode(kind, kind, 1, operand), arch, shard_shapes(arch, _deployment()), p
    )


def test_kda_projections_by_hand() -> None:
    assert _work("gemm", "delta_net_in", KDA, 10, 1).tensor_flops == 10 * 16_640
    assert _work("gemm", "delta_net_gate", KDA, 10, 1).tensor_flops == 10 * 2_048
    assert _work("gemm", "delta_net_out", KDA, 10, 1).tensor_flops == 10 * 4_096
    assert KDA.weight_elements(64) == 11_776


def test_kda_delta_rule_prefill_and_decode_by_hand() -> None:
    prefill = _work("delta_rule", "delta_net", KDA, 100, 2)
    assert prefill.tensor_flops == pytest.approx(100 * 21_504)
    assert prefill.cuda_core_ops == pytest.approx(100 * 3_648 + 2 * 3_584)
    assert prefill.special_function_ops == pytest.approx(100 * 1_252 + 2 * 2 * 2)
    assert prefill.kv_cache_read_bytes == prefill.kv_cache_write_bytes == 2 * 2_048
    decode = _work("delta_rule", "delta_net", KDA, 4, 4)
    assert decode.kv_cache_read_bytes == 4 * 2_048  # each sequence's fp32 state once


def test_kda_state_replaces_the_kv_cache() -> None:
    arch = _arch(KDA)
    assert recurrent_state_bytes(arch, shard_shapes(arch, _deployment())) == 576 + 2_048
    # on 2 GPUs each holds one head: half of both states
    assert recurrent_state_bytes(arch, shard_shapes(arch, _deployment(2))) == (576 + 2_048) / 2


def test_kda_graph_widens_its_gates_and_convolves() -> None:
    graph = build_kernel_graph(_arch(KDA), flash_attention=True, tensor_group=1, pipeline_stages=1)
    names = [n.name for n in graph.nodes]
    for name in (
        "linear_attn_in_proj",
        "linear_attn_conv1d",
        "linear_attn_gate_proj",
        "linear_attn_delta_rule",
        "linear_attn_gated_norm",
        "linear_attn_out_proj",
    ):
        assert name in names  # fmt: skip


def test_lightning_by_hand() -> None:
    assert _work("gemm", "delta_net_in", LIGHTNING, 10, 1).tensor_flops == 10 * 16_384
    assert LIGHTNING.weight_elements(64) == 10_240
    prefill = _work("lightning_attention", "delta_net", LIGHTNING, 100, 2)
    assert prefill.tensor_flops == pytest.approx(100 * 6_144)
    assert prefill.cuda_core_ops == pytest.approx(100 * 512 + 2 * 2_560)
    assert prefill.activation_read_bytes == pytest.approx(100 * 256)
    assert prefill.kv_cache_read_bytes == prefill.kv_cache_write_bytes == 2 * 2_048
    arch = _arch(LIGHTNING)
    assert recurrent_state_bytes(arch, shard_shapes(arch, _deployment())) == 2_048  # no conv


def test_lightning_graph_has_no_conv() -> None:
    graph = build_kernel_graph(
        _arch(LIGHTNING), flash_attention=True, tensor_group=1, pipeline_stages=1
    )
    kinds = {n.kind for n in graph.nodes}
    assert "lightning_attention" in kinds and "causal_conv1d" not in kinds
    assert "delta_rule" not in kinds


@pytest.mark.parametrize("shape", [KDA, LIGHTNING], ids=["kda", "lightning"])
def test_decode_time_of_linear_layers_does_not_grow_with_context(shape: DeltaNetShape) -> None:
    arch = _arch(shape)
    plan = cost_plan(arch, _deployment(), IDEAL.roofline)
    assert {plan.nodes[i].kind for i in plan.attention} == {"attention"}
    short = estimate(arch, 2, 100, 11, _deployment())
    long = estimate(arch, 2, 100, 21, _deployment())
    kind = "linear_attn_lightning" if shape.rule == "lightning" else "linear_attn_delta_rule"
    scans = [{k.name: k for k in e.decode.kernels}[kind] for e in (short, long)]
    assert scans[1].time_s == pytest.approx(2 * scans[0].time_s)  # twice the steps, same cost


def test_parameter_count_adds_the_linear_layer() -> None:
    """Tables 2 x 100 x 64 = 12,800; one attention layer 64 x (64 + 2 x 64) + 64 x 64 =
    16,384; two SwiGLU MLPs 2 x 3 x 64 x 128 = 49,152; plus the linear layer."""
    base = 12_800 + 16_384 + 49_152
    assert parameter_count(_arch(KDA)) == base + 11_776
    assert parameter_count(_arch(LIGHTNING)) == base + 10_240


def test_full_rank_mla_query_projection() -> None:
    """Kimi Linear's MLA has no q LoRA (q_lora_rank 0): q_proj 64 -> 4 heads x (8 + 4) = 48 and
    kv_a 64 -> 32 + 4 = 36 make one GEMM of 2 x 64 x 84 = 10,752 FLOP per token."""
    from service.core.architecture import MlaShape

    arch = ModelArchitecture(
        hidden_size=64, num_layers=1, num_attention_heads=4, num_key_value_heads=4, head_dim=12,
        intermediate_size=128, vocab_size=100, mla=MlaShape(0, 32, 8, 4, 8),
    )  # fmt: skip
    p = PassShape(10, 1, 1, {}, 1)
    node = KernelNode("qkv_proj", "gemm", 1, "qkv")
    work = kernel_work(node, arch, shard_shapes(arch, _deployment()), p)
    assert work.tensor_flops == 10 * 10_752
