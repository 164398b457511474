"""A request-independent plan of a model on a deployment: every kernel's counts as linear
functions of a few workload terms, turned into seconds per unit of each term.

Every count of every kernel is linear in fourteen terms (the `BASIS`): a constant, the query
tokens T, the logit rows R, per attention variant the query-key pairs, cached keys read and new
keys written, each summed over sequences (full attention's decoding sequences apart from its
prefilling ones: MLA attends them weight-absorbed, service.core.mla), and the routed experts'
rows and touched experts
(service.core.terms.expert_terms_many, nonlinear in T but computed per request in closed
form).
Probing each kernel's counter at unit values of the first twelve terms, and the expert GEMMs'
closed-form counts per row and per expert, yields the coefficients once per (model, deployment,
coefficients); pricing a request is then a few small matrix products. GEMM rows are padded for
compute time by evaluating the tensor-core row at padded T, R and expert rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture, validate_architecture
from service.core.coefficients import RooflineCoefficients
from service.core.counts import AttentionSpan, PassShape
from service.core.dtypes import gemm_compute_key
from service.core.graph import KernelNode, all_to_all_expert_group, build_kernel_graph
from service.core.hardware import GpuSpec
from service.core.kernel_work import kernel_work
from service.core.memory import weight_bytes_per_gpu
from service.core.moe import expert_gemm_per_unit, expert_load_imbalance
from service.core.roofline import STREAMING_KINDS, UnitRates, unit_rates
from service.core.shards import ShardShapes, block_fp8_experts, shard_shapes
from service.core.work import WORK_FIELDS
from service.core.workload import Deployment

FloatArray = npt.NDArray[np.float64]
BASIS: tuple[str, ...] = (
    "one",
    "tokens",
    "logit_rows",
    "pairs_full",
    "keys_full",
    "new_full",
    "pairs_sliding",
    "keys_sliding",
    "new_sliding",
    "pairs_decode",
    "keys_decode",
    "new_decode",
    "expert_rows",
    "experts_touched",
)
PROBED_TERMS = 12
"""The first PROBED_TERMS basis terms are found by probing every counter; the expert terms are
set by the expert GEMMs alone."""
ATTENTION_TERMS = slice(3, PROBED_TERMS)
_COLLECTIVE_STEPS = WORK_FIELDS.index("collective_steps")


@dataclass(frozen=True, slots=True, eq=False)
class CostPlan:
    """Everything about (model, deployment, roofline coefficients) that no request changes.

    Attributes:
        nodes: layer-graph nodes then per-step nodes.
        work_per_unit: (kernels, WORK_FIELDS, BASIS) counts per unit of each basis term.
        work_per_term: (BASIS, kernels x WORK_FIELDS) the same, terms outermost (contiguous), so
            that a row of summed terms times it is one matrix product (faster than einsum).
        padded_flops_per_term: (BASIS, kernels) the tensor-FLOPs field (1) of work_per_unit,
            terms outermost, for the padded terms.
        seconds_per_unit: (kernels, 5 units, 2 x BASIS) seconds per unit of each term: the
            tensor-core row reads the padded copy of the terms (second half), the CUDA-core,
            special-function, memory and network rows the real ones (first half).
        unit_major_seconds: (5 units x kernels, 2 x BASIS) the same, units outermost.
        latency_seconds: (kernels, 2 x BASIS) the part of the network row that is collective
            step latency (links idle, GPUs waiting on flags), not bytes on the links.
        layers: (kernels,) executions per forward pass.
        count_scale: (kernels, 1) layers times the GPUs of the group: per-GPU counts to totals.
        attention: indices of kernels whose work depends on the context.
        seconds_per_context_key: per attention kernel, each unit's seconds per sequence and
            context key (pairs and keys read grow by one per key).
        weight_bytes_per_gpu: weights on the most loaded GPU [B] (memory.weight_bytes_per_gpu).
    """

    arch: ModelArchitecture
    gpu: GpuSpec
    shapes: ShardShapes
    rates: UnitRates
    compute_key: str
    nodes: tuple[KernelNode, ...]
    work_per_unit: FloatArray
    work_per_term: FloatArray
    padded_flops_per_term: FloatArray
    seconds_per_unit: FloatArray
    unit_major_seconds: FloatArray
    latency_seconds: FloatArray
    layers: FloatArray
    count_scale: FloatArray
    attention: tuple[int, ...]
    seconds_per_context_key: dict[int, tuple[float, ...]]
    weight_bytes_per_gpu: float

    def count_totals(self, basis_sum: FloatArray, padded_sum: FloatArray) -> FloatArray:
        """Every kernel's counts [..., kernels, WORK_FIELDS] summed over executions and all
        GPUs, from basis terms summed over executions [..., BASIS] (real, and padded for the
        tensor FLOPs); any leading axes (phases, requests)."""
        kernels, fields, _ = self.work_per_unit.shape
        totals = (basis_sum @ self.work_per_term).reshape(*basis_sum.shape[:-1], kernels, fields)
        totals[..., 1] = padded_sum @ self.padded_flops_per_term
        result: FloatArray = totals * self.count_scale
        return result


def seconds_per_count(rates: UnitRates, *, streaming: bool, hand_off: bool = False) -> FloatArray:
    """Matrix (WORK_FIELDS x units) turning a row of counts into per-unit seconds; a pipeline
    `hand_off` moves its bytes at the pipeline rate."""
    memory_rate = rates.memory_bytes_per_s if streaming else rates.elementwise_memory_bytes_per_s
    matrix = np.zeros((len(WORK_FIELDS), 5))
    matrix[1, 0] = 1.0 / rates.tensor_flops_per_s  # padded tensor FLOPs set compute time
    matrix[2, 1] = 1.0 / rates.cuda_core_ops_per_s
    matrix[3, 2] = 1.0 / rates.special_function_ops_per_s
    matrix[4:9, 3] = 1.0 / memory_rate
    link = rates.pipeline_network_bytes_per_s if hand_off else rates.network_bytes_per_s
    matrix[9, 4] = 1.0 / link
    matrix[10, 4] = rates.collective_step_latency_s
    return matrix


def _probe_shape(term: str) -> PassShape:
    """A pass in which `term` is 1 and every other basis term 0 (tile 1: no padding)."""
    zero = AttentionSpan(0.0, 0.0, 0.0)
    spans = {"full": zero, "sliding": zero, "decode": zero}
    tokens = 1.0 if term == "tokens" else 0.0
    logit_rows = 1.0 if term == "logit_rows" else 0.0
    sequences = 0.0
    if "_" in term and term not in ("logit_rows",):
        quantity, variant = term.split("_")
        values = {"pairs": 0.0, "keys": 0.0, "new": 0.0, quantity: 1.0}
        spans[variant] = AttentionSpan(values["pairs"], values["keys"], values["new"])
        sequences = 1.0  # counters multiply span values by sequences
    return PassShape(tokens, sequences, logit_rows, spans, 1)


def _context_variant(node: KernelNode) -> str:
    """The basis terms a context-dependent kernel's decode context grows."""
    return "sliding" if node.operand == "sliding" else "decode"


_PROBES = tuple(_probe_shape(term) for term in BASIS[:PROBED_TERMS])


def _node_work_per_unit(
    node: KernelNode, arch: ModelArchitecture, shapes: ShardShapes
) -> FloatArray:
    """(WORK_FIELDS, BASIS) coefficients of one kernel's counts."""
    values = np.zeros((len(WORK_FIELDS), len(BASIS)))
    if node.kind == "expert_gemm":
        per_row, per_expert = expert_gemm_per_unit(node, arch, shapes)
        values[:, BASIS.index("expert_rows")] = per_row
        values[:, BASIS.index("experts_touched")] = per_expert
        return values
    values[:, :PROBED_TERMS] = np.array(
        [kernel_work(node, arch, shapes, probe) for probe in _PROBES]
    ).T
    values[:, 1:PROBED_TERMS] -= values[:, :1]  # each probe also carries the constant term
    return values


def _spans_the_stage(node: KernelNode) -> bool:
    """Whether `node` works on the whole pass's tokens across the stage (the routed experts
    and their all-to-all) rather than on one attention replica's."""
    return node.kind in ("expert_gemm", "expert_activation") or node.operand in (
        "expert_dispatch",
        "expert_combine",
    )


@lru_cache(maxsize=256)
def cost_plan(
    arch: ModelArchitecture, deployment: Deployment, roofline: RooflineCoefficients
) -> CostPlan:
    """The plan of `arch` on `deployment` (cached: a serving process sees few combinations).

    Raises the cost model's typed errors for an invalid architecture, a layout that does not
    divide it, or a precision the GPU cannot run.
    """
    validate_architecture(arch)
    par = deployment.parallelism
    imbalance = expert_load_imbalance(par.expert, roofline.expert_imbalance_per_doubling)
    shapes = replace(shard_shapes(arch, deployment), expert_imbalance=imbalance)
    if block_fp8_experts(arch, deployment.precision.weights):  # the engine's kernel's speed
        shapes = replace(shapes, expert_stream_bytes=roofline.block_fp8_expert_bytes)
    compute_key = gemm_compute_key(deployment.precision.weights, deployment.precision.activations)
    rates = unit_rates(deployment.gpu, compute_key, roofline, par.gpus_per_stage, par.pipeline)
    graph = build_kernel_graph(
        arch,
        flash_attention=deployment.flash_attention,
        tensor_group=par.attention_group,
        pipeline_stages=par.pipeline,
        expert_group=all_to_all_expert_group(par.expert, par.data),
    )
    nodes = graph.nodes + graph.step_nodes
    per_count = {
        (flag, hand_off): seconds_per_count(rates, streaming=flag, hand_off=hand_off)
        for flag in (True, False)
        for hand_off in (True, False)
    }
    # A pipeline hand-off crosses stages (maybe domains); an expert all-to-all stays in one.
    kinds = [(node.kind in STREAMING_KINDS, node.name == "pipeline_send") for node in nodes]
    work = np.array([_node_work_per_unit(node, arch, shapes) for node in nodes])
    # Under attention data parallelism a GPU runs the non-expert kernels on its replica's
    # 1/data share of the pass (its weights read whole: the constant term stays).
    per_replica = [not _spans_the_stage(node) for node in nodes]
    work[per_replica, :, 1:] /= par.data
    seconds = np.einsum("kfb,kfu->kub", work, np.array([per_count[k] for k in kinds]))
    seconds_per_unit = np.concatenate(
        [
            seconds * np.array([0.0, 1, 1, 1, 1])[:, None],
            seconds * np.array([1.0, 0, 0, 0, 0])[:, None],
        ],
        axis=2,
    )
    attention = tuple(i for i in range(len(nodes)) if np.any(work[i][:, ATTENTION_TERMS] != 0.0))
    # Decode's context grows the sliding terms of sliding kernels, the decode terms of the rest.
    context_columns = {
        variant: [
            offset + BASIS.index(f"{quantity}_{variant}")
            for quantity in ("pairs", "keys")
            for offset in (0, len(BASIS))
        ]
        for variant in ("decode", "sliding")
    }
    layers = np.array([node.layers for node in nodes], dtype=np.float64)
    return CostPlan(
        arch=arch,
        gpu=deployment.gpu,
        shapes=shapes,
        rates=rates,
        compute_key=compute_key,
        nodes=nodes,
        work_per_unit=work,
        work_per_term=np.ascontiguousarray(work.reshape(-1, len(BASIS)).T),
        padded_flops_per_term=np.ascontiguousarray(work[:, 1, :].T),
        seconds_per_unit=seconds_per_unit,
        unit_major_seconds=np.ascontiguousarray(
            seconds_per_unit.transpose(1, 0, 2).reshape(-1, 2 * len(BASIS))
        ),
        latency_seconds=np.concatenate(
            [
                work[:, _COLLECTIVE_STEPS, :] * rates.collective_step_latency_s,
                np.zeros_like(work[:, 0, :]),
            ],
            axis=1,
        ),
        layers=layers,
        count_scale=(layers * shapes.group)[:, None],
        attention=attention,
        seconds_per_context_key={
            i: tuple(
                seconds_per_unit[i][:, context_columns[_context_variant(nodes[i])]]
                .sum(axis=1)
                .tolist()
            )
            for i in attention
        },
        weight_bytes_per_gpu=weight_bytes_per_gpu(arch, shapes, par.pipeline),
    )
