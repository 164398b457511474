"""Vidur operator profiling: per-kernel times (``compute``) and collective times (``network``).

Units, checked against rooflines:
- ``time_stats.*`` are milliseconds. Llama-2-7B, 4096 tokens, TP1 on A100: the fused gate+up GEMM
  (2 x 4096 x 4096 x 22016 FLOP) takes 3.37 ms = 220 TFLOP/s and down_proj 1.60 ms = 230 TFLOP/s,
  70-74 % of the 312 TFLOP/s bf16 peak; at 1-8 tokens the projection GEMMs stream their bf16
  weights at 1.3-1.6 TB/s (A100) and 2.1-2.9 TB/s (H100), below each part's HBM peak.
- ``size`` in the network files is bytes. Vidur's profiler writes ``size = elements * 2  # bytes``
  (fp16), and the sizes here are twice its element grid (2048, 10240, ...). Reading them as fp16
  elements would give 456 GB/s A100 NVLink send/recv and 348 GB/s 8-GPU all-reduce bus
  bandwidth, above NVLink3's 300 GB/s per direction; as bytes they are 228 and 174 GB/s.

GPU assumption: Vidur's "a100" is taken as A100-SXM4-80GB and "h100" as H100-SXM5-80GB (Vidur's
device configs are the 80 GB parts). Supported by the data: 1.64 TB/s weight streaming exceeds the
40 GB A100's 1.56 TB/s peak, and 2.9 TB/s exceeds the H100 PCIe's 2.0 TB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offline.fitting.datasets_common import (
    A100_80GB,
    DEFAULT_DATA_DIR,
    H100_80GB,
    MS_PER_S,
    CsvRow,
    read_rows,
    resolve_data_dir,
)

VIDUR_COMPUTE_DIR = "vidur/profiling/compute"
VIDUR_NETWORK_DIR = "vidur/profiling/network"
COLLECTIVES: tuple[str, ...] = ("all_reduce", "send_recv")

_GPU_IDS: dict[str, str] = {"a100": A100_80GB, "h100": H100_80GB}

# Vidur op name -> project kernel name; mlp_up_proj is resolved by use_gated_mlp.
_KERNELS: dict[str, str] = {
    "emb": "embedding",
    "input_layernorm": "input_norm",
    "attn_pre_proj": "qkv_proj",
    "attn_rope": "rope",
    "attn_post_proj": "o_proj",
    "post_attention_layernorm": "post_attn_norm",
    "mlp_act": "act",
    "mlp_down_proj": "down_proj",
    "add": "residual_add",
}


@dataclass(frozen=True, slots=True)
class KernelTimeMeasurement:
    """Median time of one kernel of one layer on one TP shard for ``num_tokens`` tokens."""

    model_id: str  # "<org>/<model>" as in the directory names
    gpu_id: str
    tensor_parallel: int
    num_tokens: int
    kernel: str  # project kernel name
    vidur_op: str  # Vidur's op name, for provenance
    time_s: float  # median, s
    time_std_s: float  # standard deviation over Vidur's repeats, s
    n_head: int
    n_kv_head: int
    n_embd: int  # hidden size
    n_expanded_embd: int  # MLP intermediate size (one of gate/up when gated)
    vocab_size: int
    use_gated_mlp: bool
    row_ref: str


@dataclass(frozen=True, slots=True)
class CollectiveTimeMeasurement:
    """Median time of one NCCL collective for one message size."""

    gpu_id: str
    topology: str  # "a100_dgx", "a100_pairwise_nvlink", "h100_dgx", "h100_pairwise_nvlink"
    collective: str  # "all_reduce" | "send_recv"
    num_workers: int  # GPUs taking part
    devices_per_node: int  # of those, per node; fewer than num_workers means crossing nodes
    max_devices_per_node: int  # GPUs in a node of that topology
    size_bytes: int  # message size per GPU, bytes
    time_s: float  # median, s
    time_std_s: float
    row_ref: str


def _gpu_id(name: str, where: str) -> str:
    try:
        return _GPU_IDS[name]
    except KeyError:
        raise ValueError(f"{where}: unknown Vidur GPU {name!r}") from None


def _kernel_name(op: str, gated: bool) -> str:
    if op == "mlp_up_proj":
        # Vidur's up projection is the fused gate+up GEMM for gated MLPs.
        return "gate_up_proj" if gated else "up_proj"
    try:
        return _KERNELS[op]
    except KeyError:
        raise ValueError(f"unknown Vidur op {op!r}") from None


def _kernel_rows(row: CsvRow, gpu_id: str, model_id: str) -> list[KernelTimeMeasurement]:
    ops = [key.split(".")[1] for key in row.values if key.startswith("time_stats.")]
    gated = row.flag("use_gated_mlp")
    return [
        KernelTimeMeasurement(
            model_id=model_id,
            gpu_id=gpu_id,
            tensor_parallel=row.integer("num_tensor_parallel_workers"),
            num_tokens=row.integer("num_tokens"),
            kernel=_kernel_name(op, gated),
            vidur_op=op,
            time_s=row.number(f"time_stats.{op}.median") / MS_PER_S,
            time_std_s=row.number(f"time_stats.{op}.std") / MS_PER_S,
            n_head=row.integer("n_head"),
            n_kv_head=row.integer("n_kv_head"),
            n_embd=row.integer("n_embd"),
            n_expanded_embd=row.integer("n_expanded_embd"),
            vocab_size=row.integer("vocab_size"),
            use_gated_mlp=gated,
            row_ref=row.ref,
        )
        for op in dict.fromkeys(ops)  # five stats per op; keep each op once, in column order
    ]


def vidur_kernel_files(data_dir: Path = DEFAULT_DATA_DIR) -> list[str]:
    """Relative paths of every ``compute/<gpu>/<org>/<model>/mlp.csv``, sorted."""
    root = resolve_data_dir(data_dir)
    paths = sorted((root / VIDUR_COMPUTE_DIR).glob("*/*/*/mlp.csv"))
    if not paths:
        raise FileNotFoundError(f"no Vidur mlp.csv files under {root / VIDUR_COMPUTE_DIR}")
    return [path.relative_to(root).as_posix() for path in paths]


def vidur_network_files(data_dir: Path = DEFAULT_DATA_DIR) -> list[str]:
    """Relative paths of every ``network/<topology>/<collective>.csv``, sorted."""
    root = resolve_data_dir(data_dir)
    paths = sorted(
        path
        for collective in COLLECTIVES
        for path in (root / VIDUR_NETWORK_DIR).glob(f"*/{collective}.csv")
    )
    if not paths:
        raise FileNotFoundError(f"no Vidur collective files under {root / VIDUR_NETWORK_DIR}")
    return [path.relative_to(root).as_posix() for path in paths]


def load_vidur_kernels(data_dir: Path = DEFAULT_DATA_DIR) -> list[KernelTimeMeasurement]:
    """One record per (CSV row, Vidur op) over every profiled model and GPU."""
    records: list[KernelTimeMeasurement] = []
    for relative in vidur_kernel_files(data_dir):
        gpu, org, model = relative.split("/")[-4:-1]
        gpu_id = _gpu_id(gpu, relative)
        for row in read_rows(data_dir, relative):
            records.extend(_kernel_rows(row, gpu_id, f"{org}/{model}"))
    return records


def load_vidur_collectives(data_dir: Path = DEFAULT_DATA_DIR) -> list[CollectiveTimeMeasurement]:
    """One record per CSV row of every topology's all_reduce.csv and send_recv.csv."""
    records: list[CollectiveTimeMeasurement] = []
    for relative in vidur_network_files(data_dir):
        topology = relative.split("/")[-2]
        gpu_id = _gpu_id(topology.split("_")[0], relative)
        for row in read_rows(data_dir, relative):
            collective = row.text("collective")
            records.append(
                CollectiveTimeMeasurement(
                    gpu_id=gpu_id,
                    topology=topology,
                    collective=collective,
                    num_workers=row.integer("num_workers"),
                    devices_per_node=row.integer("devices_per_node"),
                    max_devices_per_node=row.integer("max_devices_per_node"),
                    size_bytes=row.integer("size"),
                    time_s=row.number(f"time_stats.{collective}.median") / MS_PER_S,
                    time_std_s=row.number(f"time_stats.{collective}.std") / MS_PER_S,
                    row_ref=row.ref,
                )
            )
    return records
