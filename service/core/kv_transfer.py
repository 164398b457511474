"""The hand-off of a prompt's KV cache from a prefill worker to a decode worker.

Disaggregated engines (vLLM's and SGLang's PD split, TensorRT-LLM's disaggregated serving, with
NIXL or NCCL underneath) move the KV blocks rank to rank: every GPU of the prefill worker that
holds a shard of the prompt's cache sends it to the decode worker, all of them at once, each over
its own link. So the transfer takes one GPU's bytes over one GPU's link bandwidth, and the bytes
on the wire are that times the senders. One GPU's bytes are those of the memory model
(service.core.memory.kv_cache_bytes_per_gpu): the prompt's P tokens in every attention layer
of its pipeline stage (sliding layers hold their window), at the KV cache precision, in the
layout the prefill worker shards them in (KV heads over the attention group; an MLA latent, or
heads fewer than the group, replicated, as each decode GPU holds its own copy), plus a recurrent
layer's state.

The link: when both workers' GPUs fit in one interconnect domain (an HGX baseboard's NVLink:
8 GPUs; an NVL72 rack: 72) the transfer runs at the interconnect's per-GPU bandwidth; otherwise
the workers sit in different domains and it runs at the GPU's share of the network between them
(service.core.hardware.GpuSpec). Its energy is the sending GPUs' idle draw while it lasts: the
prefill worker keeps the prompt's KV blocks (and so its GPUs' share) until the hand-off ends,
while copy engines, not the SMs, move the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.core.architecture import ModelArchitecture
from service.core.memory import kv_cache_bytes_per_gpu
from service.core.shards import shard_shapes
from service.core.workload import Deployment, Workload

NVLINK = "nvlink"
NETWORK = "inter-node network"


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """One request's KV hand-off.

    Attributes:
        bytes_per_gpu: KV cache one sending GPU holds of the request's prompts [B].
        senders: GPUs of the prefill worker that send their shard at once.
        link: `NVLINK` (both workers in one interconnect domain) or `NETWORK`.
        bandwidth_bytes_per_s: one sender's link bandwidth per direction [B/s].
        gpu_j: the senders' idle energy while the transfer lasts [J].
    """

    bytes_per_gpu: float
    senders: int
    link: str
    bandwidth_bytes_per_s: float
    gpu_j: float

    @property
    def bytes(self) -> float:
        """Bytes on the wire, all senders [B]."""
        return self.bytes_per_gpu * self.senders

    @property
    def time_s(self) -> float:
        """Seconds the hand-off takes (all senders in parallel) [s]."""
        return self.bytes_per_gpu / self.bandwidth_bytes_per_s


def transfer_link(prefill: Deployment, decode: Deployment) -> tuple[str, float]:
    """The link the KV crosses and its per-GPU bandwidth per direction [B/s]: the interconnect
    when both workers' GPUs fit in one of its domains, else the network between domains."""
    gpu = prefill.gpu
    if prefill.gpu_count + decode.gpu_count <= gpu.interconnect_domain_gpus:
        return NVLINK, gpu.interconnect_bandwidth_bytes_per_s
    return NETWORK, gpu.scale_out_bandwidth_bytes_per_s


def kv_transfer(
    arch: ModelArchitecture,
    prefill: Deployment,
    decode: Deployment,
    batch_size: int,
    prompt_tokens: int,
) -> KvTransfer:
    """The hand-off of `batch_size` prompts of `prompt_tokens` tokens each (cached tokens
    included: the decode worker holds none of them) from `prefill` to `decode`."""
    shapes = shard_shapes(arch, prefill)
    pipeline = prefill.parallelism.pipeline
    # The memory model spreads sequences over the attention replicas; the request's prompts
    # sit on one, whole.
    prompts = Workload(batch_size, prompt_tokens, 0)
    per_gpu = kv_cache_bytes_per_gpu(arch, shapes, prompts, pipeline) * shapes.data
    senders = shapes.attention_group * pipeline
    link, bandwidth = transfer_link(prefill, decode)
    seconds = per_gpu / bandwidth
    return KvTransfer(per_gpu, senders, link, bandwidth, seconds * prefill.gpu.idle_w * senders)
