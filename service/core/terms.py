"""The BASIS terms (service.core.plan) of many workloads of one model at once, as arrays.

Rows are workloads; prefill is one execution per layer, decode `output_tokens - 1` executions
whose attention grows with the context (prompt + 1 ... prompt + output - 1 keys).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.architecture import ModelArchitecture
from service.core.envelope import sum_affine_many
from service.core.moe import expected_touched_experts
from service.core.plan import BASIS
from service.core.shards import ShardShapes

FloatArray = npt.NDArray[np.float64]
_COLUMN = {name: i for i, name in enumerate(BASIS)}
# The pairs and keys-read columns of each attention variant, in the real and the padded half.
_FULL_SPAN = [_COLUMN[f"{q}_full"] + half for half in (0, len(BASIS)) for q in ("pairs", "keys")]
_SLIDING_SPAN = [
    _COLUMN[f"{q}_sliding"] + half for half in (0, len(BASIS)) for q in ("pairs", "keys")
]


@dataclass(frozen=True, slots=True)
class WorkloadTerms:
    """Per phase (0 prefill, 1 decode) and workload: basis terms of one execution, the same
    with GEMM rows padded to the tile, and executions per layer.

    Attributes:
        both: [2, N, 2 x BASIS]: `basis`, then `padded` (one array, as the plan's unit
            seconds take them).
        basis, padded: [2, N, BASIS] views of it (decode: the context-free part of one step).
        steps: [2, N] executions per layer (decode: output_tokens - 1, maybe 0).
        first, last: [N] decode's context range [keys].
        batch: [N] sequences per workload.
    """

    both: FloatArray
    steps: FloatArray
    first: FloatArray
    last: FloatArray
    batch: FloatArray

    @property
    def basis(self) -> FloatArray:
        return self.both[..., : len(BASIS)]

    @property
    def padded(self) -> FloatArray:
        return self.both[..., len(BASIS) :]

    def phase_sums(self, window: int | None) -> tuple[FloatArray, FloatArray]:
        """[2, N, BASIS] terms summed over each phase's executions: (real, padded rows)."""
        sums = self.both * self.steps[..., None]
        first, last = self.first, self.last
        # Decode's pairs and keys read grow by one per step: summed over the contexts.
        contexts = sum_affine_many(0.0, 1.0, first, last)
        windowed = contexts if window is None else capped_sum(first, last, window)
        sums[1][:, _FULL_SPAN] += (self.batch * contexts)[:, None]
        sums[1][:, _SLIDING_SPAN] += (self.batch * windowed)[:, None]
        width = len(BASIS)
        return sums[..., :width], sums[..., width:]


def capped_sum(first: FloatArray, last: FloatArray, window: int) -> FloatArray:
    """Sum over c in [first, last] of min(c, window)."""
    below = sum_affine_many(0.0, 1.0, first, np.minimum(last, window))
    above = np.maximum(0.0, last - np.maximum(first, window + 1.0) + 1.0)
    result: FloatArray = below + window * above
    return result


def padded_rows_many(rows: FloatArray, tile_m: int) -> FloatArray:
    """`rows` rounded up to whole `tile_m`-row tiles."""
    if tile_m <= 1:
        return rows
    result: FloatArray = np.ceil(rows / tile_m) * tile_m
    return result


def expert_terms_many(
    arch: ModelArchitecture, s: ShardShapes, tokens: FloatArray, tile_m: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For passes of `tokens` tokens of an MoE model: the expert rows (token-expert assignments
    on one GPU), the same padded to the GEMM tile per touched expert, and the touched experts
    (uniform routing, service.core.moe)."""
    k, experts = arch.experts_per_token, arch.num_experts
    assignments = tokens * k / s.expert
    touched = np.maximum(expected_touched_experts(tokens, experts, k) / s.expert, 1e-12)
    return assignments, touched * padded_rows_many(assignments / touched, tile_m), touched


def workload_terms(
    arch: ModelArchitecture,
    s: ShardShapes,
    batch: FloatArray,
    prompt: FloatArray,
    output: FloatArray,
    *,
    flash: bool,
    tile_m: int,
) -> WorkloadTerms:
    """The terms of workloads (batch, prompt, output) [N each, integer-valued floats]."""
    n, width = batch.shape[0], len(BASIS)
    both = np.zeros((2, n, 2 * width))
    basis = both[..., :width]
    tokens = batch * prompt
    full = prompt * (prompt + 1.0) / 2.0 if flash else prompt * prompt
    window = arch.sliding_window_tokens
    prefill, decode = basis[0], basis[1]
    basis[..., 0] = 1.0
    prefill[:, 1], prefill[:, 2] = tokens, batch
    prefill[:, 3], prefill[:, 4], prefill[:, 5] = batch * full, tokens, tokens
    if window is not None:
        inside = np.minimum(prompt, window)
        sliding = inside * (inside + 1.0) / 2.0 + (prompt - inside) * window
        prefill[:, 6] = batch * (sliding if flash else prompt * prompt)
        prefill[:, 7], prefill[:, 8] = tokens, tokens
    decode[:, 1] = decode[:, 2] = decode[:, 5] = decode[:, 8] = batch
    expert_padded = []
    if arch.is_moe:
        for phase, rows in ((0, tokens), (1, batch)):
            expert_rows, padded_experts, touched = expert_terms_many(arch, s, rows, tile_m)
            basis[phase, :, 9], basis[phase, :, 10] = expert_rows, touched
            expert_padded.append(padded_experts)
    padded = both[..., width:]
    padded[...] = basis
    # Token and logit rows of both phases padded to the GEMM tile at once.
    padded[..., 1:3] = padded_rows_many(basis[..., 1:3], tile_m)
    for phase, padded_experts in enumerate(expert_padded):
        padded[phase, :, 9] = padded_experts
    steps = np.empty((2, n))
    steps[0], steps[1] = 1.0, output - 1.0
    return WorkloadTerms(both, steps, prompt + 1.0, prompt + output - 1.0, batch)
