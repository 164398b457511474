"""Recurrent mixers (Mamba-2, gated DeltaNet) and hybrid stacks, against counts worked by hand.

The small Mamba-2 layer: hidden 64, 4 heads of 8 (d_inner 32), state 16, 2 groups, conv 4,
chunk 32, bf16, one GPU.
- conv channels = d_inner + 2 G N = 32 + 64 = 96; in_proj width = z + xBC + dt = 32 + 96 + 4 = 132.
- in_proj: 2 x 64 x 132 = 16,896 FLOP per token; out_proj: 2 x 32 x 64 = 4,096.
- SSD scan: 2 (Q N G + 2 H P N + H Q P) = 2 (32 x 16 x 2 + 2 x 4 x 8 x 16 + 4 x 32 x 8)
  = 2 x 3,072 = 6,144 tensor FLOP per token.
- conv1d: (2 x 4 taps + bias + SiLU's 4) x 96 = 1,248 ops per token.
- state per sequence: conv (4 - 1) x 96 x 2 B = 576 B; SSM 4 x 8 x 16 x 2 B = 1,024 B.
"""

from __future__ import annotations

import pytest

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.dtypes import DType
from service.core.graph import KernelNode, build_kernel_graph
from service.core.kernel_work import kernel_work
from service.core.memory import memory_footprint, parameter_count
from service.core.mixers import DeltaNetShape, MambaShape
from service.core.plan import cost_plan
from service.core.recurrent import recurrent_state_bytes
from service.core.shards import ShardShapes, shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision, Workload
from tests.core.core_support import IDEAL, catalog_gpu, estimate

MAMBA = MambaShape(num_heads=4, head_dim=8, state_size=16, n_groups=2, conv_kernel=4, chunk_size=32)
# 6 Nemotron-H-style blocks: 1 attention (*), 2 Mamba-2 (M), 3 squared-ReLU MLPs (-)
HYBRID = ModelArchitecture(
    hidden_size=64,
    num_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=100,
    mlp="plain",
    activation="relu",
    position="none",
    mamba=MAMBA,
    num_mamba_layers=2,
    num_mixer_free_layers=3,
    num_mlp_free_layers=3,
)
DELTA = DeltaNetShape(num_key_heads=2, num_value_heads=4, key_head_dim=16, value_head_dim=32)
DELTA_ARCH = ModelArchitecture(
    hidden_size=64,
    num_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=128,
    vocab_size=100,
    delta_net=DELTA,
    num_delta_net_layers=3,
)


H100 = catalog_gpu("H100-SXM5-80GB")
ROOFLINE = IDEAL.roofline


def _deployment(tensor: int = 1) -> Deployment:
    return Deployment(H100, Parallelism(tensor=tensor), Precision())


def _shapes(arch: ModelArchitecture, tensor: int = 1) -> ShardShapes:
    return shard_shapes(arch, _deployment(tensor))


def _pass(tokens: float, sequences: float) -> PassShape:
    return PassShape(tokens, sequences, sequences, {}, 1)


def _work(kind: str, operand: str, arch: ModelArchitecture, p: PassShape) -> Work:
    return kernel_work(KernelNode(kind, kind, 1, operand), arch, _shapes(arch), p)


def test_one_mamba2_layer_flops_by_hand() -> None:
    prefill = _pass(tokens=100, sequences=2)
    assert _work("gemm", "mamba_in", HYBRID, prefill).tensor_flops == 100 * 16_896
    assert _work("gemm", "mamba_out", HYBRID, prefill).tensor_flops == 100 * 4_096
    assert _work("ssd_scan", "mamba", HYBRID, prefill).tensor_flops == 100 * 6_144
    assert _work("causal_conv1d", "mamba", HYBRID, prefill).cuda_core_ops == 100 * 1_248


def test_one_mamba2_layer_state_bytes_by_hand() -> None:
    """Each pass reads and writes each sequence's state once: the conv state in the conv1d,
    the SSM state in the scan; the model's per-sequence state is both over its 2 layers."""
    prefill = _pass(tokens=100, sequences=2)
    conv = _work("causal_conv1d", "mamba", HYBRID, prefill)
    scan = _work("ssd_scan", "mamba", HYBRID, prefill)
    assert conv.kv_cache_read_bytes == conv.kv_cache_write_bytes == 2 * 576
    assert scan.kv_cache_read_bytes == scan.kv_cache_write_bytes == 2 * 1_024
    assert recurrent_state_bytes(HYBRID, _shapes(HYBRID)) == 2 * (576 + 1_024)
    fp32 = ModelArchitecture(**{**_fields(HYBRID), "mamba": MambaShape(4, 8, 16, 2, 4, 32, True)})
    assert recurrent_state_bytes(fp32, _shapes(fp32)) == 2 * (576 + 2 * 1_024)


def test_tensor_parallel_splits_heads_and_state() -> None:
    """On 2 GPUs each holds 2 heads and 1 group: conv channels 16 + 2 x 16 = 48."""
    state = recurrent_state_bytes(HYBRID, _shapes(HYBRID, tensor=2))
    assert state == 2 * (3 * 48 * 2 + 2 * 8 * 16 * 2)


def test_delta_net_decode_step_reads_its_state_once() -> None:
    """A decode step of 5 sequences reads and writes each one's 4 x 16 x 32 state once (bf16),
    and its time does not grow with the context (not an attention kernel)."""
    decode = _pass(tokens=5, sequences=5)
    rule = _work("delta_rule", "delta_net", DELTA_ARCH, decode)
    state = 4 * 16 * 32 * 2
    assert rule.kv_cache_read_bytes == rule.kv_cache_write_bytes == 5 * state
    conv = _work("causal_conv1d", "delta_net", DELTA_ARCH, decode)
    assert conv.kv_cache_read_bytes == 5 * 3 * (2 * 2 * 16 + 4 * 32) * 2  # conv state only
    plan = cost_plan(DELTA_ARCH, _deployment(), ROOFLINE)
    context_kernels = {plan.nodes[i].kind for i in plan.attention}
    assert context_kernels == {"attention"}


def test_hybrid_memory_is_weights_plus_attention_kv_plus_states() -> None:
    """Weights: attention 64 x (64 + 2 x 32) + 64 x 64 = 12,288; Mamba-2 64 x 132 + 96 x 4 +
    32 x 64 = 10,880 each; plain MLP 2 x 64 x 128 = 16,384 each; tables 2 x 100 x 64 = 12,800:
    96,000 elements, 192,000 B in bf16. KV: 3 sequences x 15 tokens x 1 attention layer x
    (2 x 2 x 16) x 2 B = 5,760 B; states 3 x 2 x 1,600 B = 9,600 B."""
    assert parameter_count(HYBRID) == 96_000
    footprint = memory_footprint(HYBRID, _shapes(HYBRID), Workload(3, 10, 5), _deployment())
    assert footprint.weight_bytes_per_gpu == 192_000
    assert footprint.kv_cache_bytes_per_gpu == 5_760 + 9_600


def test_hybrid_graph_runs_each_sublayer_on_its_blocks() -> None:
    graph = build_kernel_graph(HYBRID, flash_attention=True, tensor_group=2, pipeline_stages=1)
    layers = {node.name: node.layers for node in graph.nodes}
    assert layers["qkv_proj"] == layers["attention"] == 1
    assert "rope" not in layers
    assert layers["mamba_ssd_scan"] == layers["mamba_conv1d"] == 2
    assert layers["input_norm"] == layers["attn_all_reduce"] == 3  # blocks with a mixer
    assert layers["post_attn_norm"] == layers["up_proj"] == layers["mlp_residual_add"] == 3
    # one norm and one residual add per block: 3 + 3 of each over the 6 blocks
    norms = layers["input_norm"] + layers["post_attn_norm"]
    adds = layers["attn_residual_add"] + layers["mlp_residual_add"]
    assert norms == adds == 6


def test_a_hybrid_quote_prices_prefill_and_decode() -> None:
    """Prefill's SSD scan does the chunked work of every prompt token of both layers; a decode
    step's scan does not grow with the context: twice the output costs twice the scan."""
    plan = cost_plan(HYBRID, _deployment(), ROOFLINE)
    index = [n.kind for n in plan.nodes].index("ssd_scan")
    assert index not in plan.attention
    assert plan.work_per_unit[index][0, 1] == pytest.approx(6_144)  # tensor FLOPs per token
    short = estimate(HYBRID, 2, 100, 11, _deployment())
    long = estimate(HYBRID, 2, 100, 21, _deployment())
    prefill = {k.name: k for k in short.prefill.kernels}["mamba_ssd_scan"]
    assert prefill.tensor_flops == pytest.approx(2 * 2 * 100 * 6_144)
    scan = [{k.name: k for k in e.decode.kernels}["mamba_ssd_scan"] for e in (short, long)]
    assert scan[1].time_s == pytest.approx(2 * scan[0].time_s)


def test_invalid_layer_mix_is_refused() -> None:
    from service.core.architecture import validate_architecture
    from service.core.cost_model_errors import InvalidArchitecture

    with pytest.raises(InvalidArchitecture):
        validate_architecture(ModelArchitecture(**{**_fields(HYBRID), "num_mamba_layers": 5}))
    with pytest.raises(InvalidArchitecture):
        validate_architecture(ModelArchitecture(**{**_fields(HYBRID), "mamba": None}))


def _fields(arch: ModelArchitecture) -> dict[str, object]:
    return {name: getattr(arch, name) for name in arch.__dataclass_fields__}


def test_weights_precision_leaves_state_in_activation_dtype() -> None:
    fp8 = Deployment(H100, Parallelism(), Precision(weights=DType.FP8))
    assert recurrent_state_bytes(HYBRID, shard_shapes(HYBRID, fp8)) == 2 * (576 + 1_024)


def test_a_single_mamba_group_is_replicated_under_tensor_parallelism() -> None:
    """With one group (Granite 4.0-H, Falcon-H1) each of 2 GPUs holds half the heads but all of
    B and C: in_proj 16 + (16 + 2 x 16) + 2 = 66 wide, conv over 48 channels, out_proj 16 x 64:
    64 x 66 + 48 x 4 + 16 x 64 = 5,440 elements per layer. Per GPU: attention 12,288 / 2,
    Mamba-2 2 x 5,440, MLPs 3 x 16,384 / 2, tables 12,800 / 2 = 48,000 elements, 96,000 B."""
    one_group = ModelArchitecture(**{**_fields(HYBRID), "mamba": MambaShape(4, 8, 16, 1, 4, 32)})
    footprint = memory_footprint(
        one_group, _shapes(one_group, tensor=2), Workload(1, 1, 1), _deployment(tensor=2)
    )
    assert footprint.weight_bytes_per_gpu == 96_000


def test_mamba_groups_that_do_not_split_are_refused() -> None:
    from service.core.cost_model_errors import InvalidParallelism

    with pytest.raises(InvalidParallelism) as raised:
        _shapes(HYBRID, tensor=4)  # 2 groups over 4 GPUs
    assert raised.value.field == "hardware.parallelism.tensor"


def test_one_mamba1_layer_by_hand() -> None:
    """A Mamba-1 mixer (Jamba's): hidden 64, d_inner 128 (128 one-wide heads), state 4, dt rank
    8, conv 4. Per token: in_proj 2 x 64 x 256 = 32,768 FLOP; x_proj 2 x 128 x (8 + 2 x 4) =
    4,096; dt_proj 2 x 8 x 128 = 2,048; out_proj 2 x 128 x 64 = 16,384; the selective scan
    7 x 128 x 4 + 6 x 128 = 4,352 CUDA-core ops and 128 x 4 + 3 x 128 = 896 exps, no tensor-core
    work; its state per sequence 128 x 4 x 2 B = 1,024 B, read and written once per pass."""
    jamba = ModelArchitecture(
        **{
            **_fields(HYBRID),
            "mamba": MambaShape(128, 1, 4, 1, 4, dt_rank=8),
            "num_mamba_layers": 2,
        }
    )
    prefill = _pass(tokens=100, sequences=2)
    flops = {op: _work("gemm", op, jamba, prefill).tensor_flops / 100 for op in (
        "mamba_in", "mamba_x", "mamba_dt", "mamba_out")}  # fmt: skip
    assert flops == {
        "mamba_in": 32_768, "mamba_x": 4_096, "mamba_dt": 2_048, "mamba_out": 16_384
    }  # fmt: skip
    scan = _work("selective_scan", "mamba", jamba, prefill)
    assert (scan.cuda_core_ops, scan.special_function_ops) == (100 * 4_352, 100 * 896)
    assert scan.tensor_flops == 0
    assert scan.kv_cache_read_bytes == scan.kv_cache_write_bytes == 2 * 1_024
    graph = build_kernel_graph(jamba, flash_attention=True, tensor_group=1, pipeline_stages=1)
    kinds = [n.kind for n in graph.nodes if n.name.startswith("mamba")]
    assert kinds == ["gemm", "causal_conv1d", "gemm", "gemm", "selective_scan", "gemm"]


def test_mamba_1_alone_prices_scan_and_state_only() -> None:
    """Two Mamba-1 layers and nothing else (Mamba, Falcon-Mamba): d_inner 128, state 16, dt rank
    8. State per sequence: conv 3 x 128 x 2 B = 768 B and SSM 128 x 16 x 2 B = 4,096 B per
    layer, 9,728 B for both; on 2 GPUs half each (the channels split; the single attention
    head of the placeholder fields does not stop tensor parallelism)."""
    mamba1 = ModelArchitecture(
        hidden_size=64, num_layers=2, num_attention_heads=1, num_key_value_heads=1,
        head_dim=64, intermediate_size=128, vocab_size=100, position="none",
        mamba=MambaShape(128, 1, 16, 1, 4, dt_rank=8), num_mamba_layers=2,
        num_mlp_free_layers=2,
    )  # fmt: skip
    assert recurrent_state_bytes(mamba1, _shapes(mamba1)) == 9_728
    assert recurrent_state_bytes(mamba1, _shapes(mamba1, tensor=2)) == 9_728 / 2
    graph = build_kernel_graph(mamba1, flash_attention=True, tensor_group=2, pipeline_stages=1)
    kinds = {node.kind for node in graph.nodes}
    assert "attention" not in kinds and "activation" not in kinds
    assert "selective_scan" in kinds
    short = estimate(mamba1, 2, 100, 11, _deployment())
    long = estimate(mamba1, 2, 100, 21, _deployment())
    scans = [{k.name: k for k in e.decode.kernels}["mamba_selective_scan"] for e in (short, long)]
    assert scans[1].time_s == pytest.approx(2 * scans[0].time_s)
