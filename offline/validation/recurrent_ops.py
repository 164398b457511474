"""The recurrent-mixer rows of aiconfigurator's kernel tables as the cost model's kernels
(``<gpu>/linear_attention/<engine>/<version>/{mamba2,gdn}_perf.parquet`` and
``<gpu>/kda/<engine>/<version>/kda_perf.parquet``).

A row is one measured kernel of a Mamba-2 layer (``op_name`` mamba2: the causal conv1d of
prefill and decode), a gated-DeltaNet layer (``gdn``: the conv1d, the chunked delta rule in
prefill, the recurrent update in decode) or a Kimi Delta Attention layer (``kda``: the conv1d
over q, k and v in one kernel, chunk_kda or FlashKDA in prefill, the recurrent update in
decode) at `batch_size` sequences of `seq_len` tokens (decode: one token each); KDA's
``verify`` rows (speculative decoding's several tokens per sequence) are not priced. A row's
shapes are per GPU (the tables sweep the head counts a tensor-parallel shard holds), so it is
priced on one GPU: a mixer of those shapes in a one-layer model, bf16, the pass's tokens and
sequences, through the counter a quote uses (`service.core.kernel_work`).
The SSD scan of Mamba-2 and Jamba's selective scan have no rows in these tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from offline.validation.kernel_pricing import KernelCall, PricingContext, RowCalls
from offline.validation.kernel_tables import KernelTable
from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode
from service.core.hardware import GpuSpec
from service.core.kernel_work import kernel_work
from service.core.mixers import DeltaNetShape, MambaShape
from service.core.roofline import STREAMING_KINDS
from service.core.shards import shard_shapes
from service.core.work import Work
from service.core.workload import Deployment, Parallelism, Precision

# kernel_source -> the cost model's kernel kind
KERNEL_KINDS = {
    "causal_conv1d_fn": "causal_conv1d",
    "causal_conv1d_update": "causal_conv1d",
    "chunk_gated_delta_rule": "delta_rule",
    "chunk_gated_delta_rule_flashinfer": "delta_rule",
    "chunk_gated_delta_rule_triton": "delta_rule",
    "fused_recurrent_gated_delta_rule": "delta_rule",
    "fused_recurrent_gated_delta_rule_packed_decode": "delta_rule",
    "causal_conv1d_fn_qkv3": "causal_conv1d",
    "chunk_kda": "delta_rule",
    "flashkda_fwd": "delta_rule",
    "fused_recurrent_kda": "delta_rule",
    "fused_recurrent_kda_packed_decode": "delta_rule",
    "kda_fused_decode": "delta_rule",
    "fused_kda_decode": "delta_rule",
}


def row_architecture(row: Mapping[str, Any]) -> ModelArchitecture:
    """A one-layer model whose only mixer has the row's shapes."""
    hidden = int(row["d_model"])
    mamba, delta = None, None
    if row["op_name"] == "mamba2":
        mamba = MambaShape(
            num_heads=int(row["nheads"]),
            head_dim=int(row["head_dim"]),
            state_size=int(row["d_state"]),
            n_groups=int(row["n_groups"]),
            conv_kernel=int(row["d_conv"]),
            chunk_size=int(row["chunk_size"]),
        )
    else:
        delta = DeltaNetShape(
            num_key_heads=int(row["num_k_heads"]),
            num_value_heads=int(row["num_v_heads"]),
            key_head_dim=int(row["head_k_dim"]),
            value_head_dim=int(row["head_v_dim"]),
            conv_kernel=int(row["d_conv"]),
            state_fp32=True,  # Qwen3.5's mamba_ssm_dtype float32; vLLM keeps KDA's in fp32
            rule="kda" if row["op_name"] == "kda" else "gated_delta",
        )
    return ModelArchitecture(
        hidden_size=hidden,
        num_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=hidden,
        intermediate_size=hidden,
        vocab_size=1,
        mamba=mamba,
        num_mamba_layers=1 if mamba else 0,
        delta_net=delta,
        num_delta_net_layers=1 if delta else 0,
    )


def row_work(row: Mapping[str, Any], gpu: GpuSpec) -> tuple[str, Work, bool]:
    """(op label, the cost model's counts, whether the kernel streams memory) of the kernel a
    row measured, on one `gpu`, in bf16."""
    arch = row_architecture(row)
    shapes = shard_shapes(arch, Deployment(gpu, Parallelism(), Precision()))
    kind = KERNEL_KINDS[str(row["kernel_source"])]
    operand = "mamba" if row["op_name"] == "mamba2" else "delta_net"
    sequences = float(row["batch_size"])
    tokens = sequences if row["phase"] == "generation" else sequences * float(row["seq_len"])
    p = PassShape(tokens, sequences, sequences, {}, 1)
    work = kernel_work(KernelNode(kind, kind, 1, operand), arch, shapes, p)
    return f"{row['op_name']} {kind} ({row['phase']})", work, kind in STREAMING_KINDS


def recurrent(table: KernelTable, i: int, ctx: PricingContext) -> RowCalls | str:
    """The row mapper of the ``mamba2_perf`` and ``gdn_perf`` tables (one kernel launch)."""
    row = {column: values[i] for column, values in table.columns.items()}
    if row["kernel_source"] not in KERNEL_KINDS:
        return f"kernel {row['kernel_source']} is not one the cost model counts"
    if row["phase"] not in ("context", "generation"):
        return f"{row['phase']} rows (speculative decoding) are not priced"
    label, work, streaming = row_work(row, ctx.gpu)
    return label, [KernelCall(work, "bf16", streaming)], ctx.launch_s
