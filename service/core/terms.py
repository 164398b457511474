"""The BASIS terms (service.core.plan) of many workloads of one model at once, as arrays.

Rows are workloads; prefill is one execution per layer, decode `output_tokens - 1` executions
whose attention grows with the context (prompt + 1 ... prompt + output - 1 keys). Which
sequences each pass carries (a static batch, or a continuous batch's mean pass) is
service.core.steady_state's PassMix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.envelope import sum_of_integers
from service.core.moe import expected_touched_experts
from service.core.pass_plans import NO_WINDOW, ContextRows
from service.core.plan import BASIS
from service.core.steady_state import PassMix

FloatArray = npt.NDArray[np.float64]
_COLUMN = {name: i for i, name in enumerate(BASIS)}
# The pairs and keys-read columns decode's growing context adds to, in the real and the padded
# half: full attention's decoding-sequence terms and the sliding terms.
_DECODE_SPAN = np.array(
    [_COLUMN[f"{q}_decode"] + half for half in (0, len(BASIS)) for q in ("pairs", "keys")]
)
_SLIDING_SPAN = np.array(
    [_COLUMN[f"{q}_sliding"] + half for half in (0, len(BASIS)) for q in ("pairs", "keys")]
)
_EXPERT_ROWS = _COLUMN["expert_rows"]
_DECODE_CONTEXT = slice(_COLUMN["pairs_decode"], _COLUMN["keys_decode"] + 1)
assert _DECODE_CONTEXT.stop - _DECODE_CONTEXT.start == 2
assert BASIS[3:6] == ("pairs_full", "keys_full", "new_full")
# The columns whose rows are GEMM rows, padded to the tile in the padded half.
_TILED = np.isin(
    np.arange(len(BASIS)),
    [_COLUMN[name] for name in ("tokens", "logit_rows", "keys_full", "new_decode")],
)


# Not frozen: built on every pass, and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (several times the cost); treated as read-only all the same.
@dataclass(slots=True, eq=False)
class WorkloadTerms:
    """Per phase (0 prefill, 1 decode) and workload: basis terms of one execution, the same
    with GEMM rows padded to the tile, and executions per layer.

    Attributes:
        both: [2, N, 2 x BASIS]: `basis`, then `padded` (one array, as the plan's unit
            seconds take them).
        basis, padded: [2, N, BASIS] views of it (decode: the context-free part of one step).
        steps: [2, N] executions per layer (decode: output_tokens - 1, maybe 0).
        first, last: [N] decode's context range [keys].
        batch: [N] sequences each decode pass advances along that range.
        repeats: [N] waves the workload runs in (service.core.schedule).
        share: [2, N] the request's share of each phase's energy and counts
            (service.core.steady_state).
    """

    both: FloatArray
    steps: FloatArray
    first: FloatArray
    last: FloatArray
    batch: FloatArray
    repeats: FloatArray
    share: FloatArray

    @property
    def basis(self) -> FloatArray:
        return self.both[..., : len(BASIS)]

    @property
    def padded(self) -> FloatArray:
        return self.both[..., len(BASIS) :]

    def phase_sums(
        self, window: FloatArray, any_window: bool = True
    ) -> tuple[FloatArray, FloatArray]:
        """[2, N, BASIS] terms summed over each phase's executions and waves, times the
        request's share: (real, padded rows); `window` [N] each row's capped window
        (service.core.pass_plans.NO_WINDOW where none); `any_window` False when no row has
        one (its sliding terms are then not read)."""
        sums = self.both * self.steps[..., None]
        first, last = self.first, self.last
        # Decode's pairs and keys read grow by one per step: summed over the contexts.
        contexts = sum_of_integers(first, last)
        sums[1][:, _DECODE_SPAN] += (self.batch * contexts)[:, None]
        if any_window and (window < NO_WINDOW).any():  # else no sliding kernel reads these
            windowed = capped_sum(first, last, window)
            sums[1][:, _SLIDING_SPAN] += (self.batch * windowed)[:, None]
        sums *= (self.share * self.repeats)[..., None]
        width = len(BASIS)
        return sums[..., :width], sums[..., width:]


def capped_sum(first: FloatArray, last: FloatArray, window: FloatArray | int) -> FloatArray:
    """Sum over c in [first, last] of min(c, window) (window: one, or one per range)."""
    below = sum_of_integers(first, np.minimum(last, window))
    above = np.maximum(0.0, last - np.maximum(first, window + 1.0) + 1.0)
    result: FloatArray = below + window * above
    return result


def padded_rows_many(rows: FloatArray, tile_m: FloatArray, all_tiled: bool = False) -> FloatArray:
    """`rows` rounded up to whole tiles of `tile_m` rows (one tile height per row, broadcast;
    a tile of 1 row pads nothing; `all_tiled`: every tile has more than one row)."""
    padded: FloatArray = np.ceil(rows / tile_m) * tile_m
    if all_tiled:
        return padded
    result: FloatArray = np.where(tile_m > 1, padded, rows)
    return result


def expert_terms_many(
    rows: ContextRows, tokens: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For passes of `tokens` tokens [N] of each row's model: the expert rows (token-expert
    assignments on one GPU), the same padded to the GEMM tile per touched expert, and the
    touched experts (uniform routing, service.core.moe); 0 for a model without experts."""
    k, experts = rows.experts_per_token, rows.num_experts
    assignments = tokens * k / rows.expert
    touched = np.maximum(expected_touched_experts(tokens, experts, k) / rows.expert, 1e-12)
    padded = touched * padded_rows_many(assignments / touched, rows.tile_m, rows.all_tiled)
    touched = touched * rows.moe
    return assignments, padded, touched


def decode_expert_terms_many(
    rows: ContextRows, mix: PassMix
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """expert_terms_many of a decode phase's mean pass, taken over the passes as they run.

    A continuous batch's mean decode pass carries its d decoding sequences and, on average,
    a = (C / O) N prompt tokens; but the prompts come in chunks of c = min(N, B - d / r)
    tokens (the budget B left beside one replica's decode tokens), so a share
    f = min(1, a / c) of the passes carries a chunk (d + a / f tokens) and the rest only the
    d decode tokens. The expert rows are linear in the tokens (the mean is exact); the
    touched experts and their padded rows are concave in them, so a pass of the mean tokens
    would touch nearly every expert whenever the prompt tokens alone would, where most passes
    touch only the decode tokens' few: they are averaged over the two kinds of pass. A static
    batch (no prompt in decode) is unchanged."""
    decode = mix.decoding[1]
    prompt = mix.prefilling[1] * mix.new_tokens
    left = np.maximum(rows.prefill_budget_tokens - decode / rows.data, 1.0)
    chunk = np.minimum(mix.new_tokens, left)
    share = np.minimum(prompt / chunk, 1.0)
    if not np.count_nonzero(share):
        return expert_terms_many(rows, decode)
    carrying = expert_terms_many(rows, decode + prompt / np.maximum(share, 1e-12))
    alone = expert_terms_many(rows, decode)
    mixed = tuple(share * c + (1.0 - share) * a for c, a in zip(carrying, alone, strict=True))
    return mixed[0], mixed[1], mixed[2]


def workload_terms(
    rows: ContextRows,
    mix: PassMix,
    prompt: FloatArray,
    output: FloatArray,
    repeats: FloatArray,
) -> WorkloadTerms:
    """The terms of workloads whose passes `mix` describes (prompt, output: [N] integer-valued
    floats; `repeats`: [N] waves each runs; `rows`: each one's context). A pass of p prompts
    of N computed tokens over K cached ones and d decoding sequences has T = d + p N query
    tokens and d + p logit rows; each prompt scores N K + N (N + 1) / 2 query-key pairs
    (causal flash; unfused: N P), reads the K, V of all P prompt tokens and writes N new ones
    (the full terms); the d decoding sequences' full-attention context and new keys are the
    decode terms. Terms of sliding (or otherwise capped) layers are 0 in a model without
    them, and so are the expert terms in a model without experts."""
    n, width = prompt.shape[0], len(BASIS)
    both = np.zeros((2, n, 2 * width))
    basis = both[..., :width]
    new = mix.new_tokens
    cached = prompt - new
    full = cached * new + new * (new + 1.0) / 2.0  # causal flash; unfused: every pair
    if not rows.all_flash:
        full = np.where(rows.flash > 0, full, new * prompt)
    window, windowed = rows.window, rows.has_window
    p, d = mix.prefilling, mix.decoding  # [2, N]
    tokens = d + p * new
    # A continuous prefill pass is priced whole: its decoding sequences' mean contexts are
    # read in it; decode passes take them from the context range (service.core.phase).
    baked = np.zeros(p.shape)
    baked[0] = d[0] * mix.mean_context
    basis[..., 0] = 1.0
    basis[..., 1], basis[..., 2] = tokens, d + p
    # pairs, keys read and new keys of the prompts (the full terms), in one product
    np.multiply(p[..., None], np.array((full, prompt, new)).T, out=basis[..., 3:6])
    basis[..., _DECODE_CONTEXT] = baked[..., None]  # pairs and keys read
    basis[..., _COLUMN["new_decode"]] = d
    # Sliding terms: with a window, its capped spans; without, only decode's new keys (their
    # writes are the decode tokens whichever layer writes them).
    if rows.any_window:
        sliding = np.where(rows.flash > 0, capped_sum(cached + 1.0, prompt, window), new * prompt)
        steps = np.maximum(output - 1.0, 1.0)
        baked[0] = d[0] * capped_sum(prompt + 1.0, prompt + output - 1.0, window) / steps
        basis[..., 6] = (p * sliding + baked) * windowed
        basis[..., 7] = (p * (new + np.minimum(cached, window)) + baked) * windowed
        basis[..., 8] = tokens * windowed
    basis[1, :, 8] = tokens[1]
    expert_padded = []
    if rows.any_moe:
        for phase in (0, 1):
            expert_rows, padded_experts, touched = (
                expert_terms_many(rows, tokens[0])
                if phase == 0
                else decode_expert_terms_many(rows, mix)
            )
            basis[phase, :, _EXPERT_ROWS], basis[phase, :, _EXPERT_ROWS + 1] = expert_rows, touched
            expert_padded.append(padded_experts)
    padded = both[..., width:]
    padded[...] = basis
    # GEMM rows of both phases padded to the tile at once: tokens, logit rows, and MLA's
    # kv_b_proj rows (prefill's decompressed keys, decode's absorbed tokens); every column is
    # padded and the tiled ones copied (a masked copy costs less than a gather and a scatter).
    np.copyto(padded, padded_rows_many(basis, rows.tile_m[:, None], rows.all_tiled), where=_TILED)
    for phase, padded_experts in enumerate(expert_padded):
        padded[phase, :, _EXPERT_ROWS] = padded_experts
    return WorkloadTerms(
        both, mix.steps, prompt + 1.0, prompt + output - 1.0, d[1], repeats, mix.share
    )
