"""How an engine runs workloads whose KV cache does not fit at once beside the weights, for N
workloads at once.

vLLM and SGLang admit a waiting sequence only while free KV-cache blocks remain. A static batch
of b sequences of P + O tokens, of which only W = floor(free / one sequence's KV cache at its
longest) fit at once (free = GPU memory - weights, per GPU), therefore runs in ceil(b / W)
waves. The waves are priced as equal ones of b / waves sequences: under a per-pass cost affine
in the batch (weights read once per pass, the rest per sequence) this is the cost of the
engine's W, ..., W, remainder, without pricing two batch sizes. (A scheduler that admits on
prompt blocks and preempts under pressure keeps more sequences running early and recomputes the
preempted ones' prompts later: about the same passes, plus prefill work; waves are the simpler
bound and say so.) A continuous batch holds each sequence for its whole life, P + (O - 1) / 2
tokens on average: a replica holds at most floor(free / that) of them, so more running
sequences than that are priced at that many. Only a sequence that cannot fit alone, at its
longest, beside the weights is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.core.pass_plans import ContextRows
from service.core.results import MemoryFootprint

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
_GIB = 2.0**30


# Not frozen: built on every pass, and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (several times the cost); treated as read-only all the same.
@dataclass(slots=True, eq=False)
class KvSchedule:
    """What runs at once, per workload [N].

    Attributes:
        batch: the request's sequences in each wave [sequences].
        running: sequences in each pass of a continuous batch (static: `batch`).
        waves: how many times that runs [-].
        kv_cache_bytes: KV cache per GPU while it runs [B].
        alone_bytes: KV cache per GPU of one sequence at its longest [B].
        notes: per workload, a warning when the schedule differs from what was asked, else "".
    """

    batch: FloatArray
    running: FloatArray
    waves: FloatArray
    kv_cache_bytes: FloatArray
    alone_bytes: FloatArray
    notes: tuple[str, ...]

    def alone(self, j: int, weight_bytes: float, capacity_bytes: float) -> MemoryFootprint:
        """Workload j's footprint with one sequence at its longest (what must fit)."""
        return MemoryFootprint(weight_bytes, float(self.alone_bytes[j]), capacity_bytes)


def kv_schedule(
    batch: FloatArray,
    running: FloatArray,
    continuous: BoolArray,
    full_bytes: FloatArray,
    mean_bytes: FloatArray,
    free_bytes: FloatArray | float,
    *,
    limited: bool,
    any_continuous: bool | None = None,
) -> KvSchedule:
    """The schedule of workloads of `batch` sequences (`running` in a continuous batch where
    `continuous`), whose sequences' KV cache per GPU is `full_bytes` at their longest and
    `mean_bytes` on average over their life, with `free_bytes` per GPU beside the weights
    (each [N]; one free size may serve all).
    `limited` False: memory unlimited (everything at once). `any_continuous`: whether any
    row is continuous, when the caller knows it."""
    # Without a continuous row, the continuous branches (and their wheres) are not computed.
    mixed = bool(continuous.any()) if any_continuous is None else any_continuous
    if limited:
        runs = np.minimum(batch, np.floor(free_bytes / full_bytes))
        if mixed:
            held = np.floor(free_bytes / mean_bytes)
            runs = np.where(continuous, np.minimum(running, held), runs)
        runs = np.maximum(runs, 1.0)
        waves = np.ceil(batch / runs)
    else:
        runs = np.where(continuous, running, batch)
        waves = np.ones(batch.shape)
    per_wave = batch / waves
    if mixed:
        runs = np.where(continuous, runs, per_wave)
        kv = np.where(continuous, runs * mean_bytes, per_wave * full_bytes)
    else:
        runs, kv = per_wave, per_wave * full_bytes
    # A note where the schedule differs from what was asked (see _note); most have none.
    noted = waves > 1
    if mixed:
        noted |= continuous & (runs < running)
    notes: tuple[str, ...] = ("",) * batch.shape[0]
    if np.count_nonzero(noted):  # (a direct count costs a fraction of ndarray.any())
        notes = tuple(
            _note(b, c, w, r, cont, free)
            for b, c, w, r, cont, free in zip(
                batch.tolist(),
                running.tolist(),
                waves.tolist(),
                runs.tolist(),
                continuous.tolist(),
                (
                    free_bytes
                    if isinstance(free_bytes, np.ndarray)
                    else np.full_like(batch, free_bytes)
                ).tolist(),
                strict=True,
            )
        )
    return KvSchedule(per_wave, runs, waves, kv, full_bytes, notes)


def _note(
    batch: float, asked: float, waves: float, runs: float, continuous: bool, free: float
) -> str:
    if continuous and runs < asked:
        return (
            f"the KV cache beside the weights ({free / _GIB:.1f} GiB per GPU) holds about "
            f"{runs:.0f} running sequences of this length, not {asked:.0f}: priced with "
            f"{runs:.0f} running"
            + (f", the request's {batch:.0f} sequences in {waves:.0f} waves" if waves > 1 else "")
        )
    if waves > 1:
        return (
            f"the KV cache of all {batch:.0f} sequences does not fit beside the weights "
            f"({free / _GIB:.1f} GiB per GPU): priced as the engine schedules it, admitting "
            f"sequences as KV-cache blocks free up, in {waves:.0f} waves of "
            f"{batch / waves:.4g} sequences"
        )
    return ""


def kv_cache_bytes_many(
    rows: ContextRows, batch: FloatArray | float, tokens: FloatArray
) -> FloatArray:
    """memory.kv_cache_bytes_per_gpu of workloads of `batch` sequences of `tokens` tokens, each
    of its row's model and deployment [B] (`tokens` [N], or [..., N] for several lengths):
    attention layers' KV (sliding ones' capped at the window), then recurrent layers' state (0
    in a model without)."""
    entries = rows.kv_full_layers * tokens  # per sequence, over the attention layers
    if rows.any_sliding_kv:  # else every row's sliding term is 0
        entries = entries + rows.kv_sliding_layers * np.minimum(tokens, rows.kv_window)
    per_stage = entries / rows.pipeline
    sequences = batch / rows.data  # on this GPU's attention replica
    result: FloatArray = sequences * per_stage * rows.kv_width * rows.kv_bytes
    return result + sequences * rows.state_bytes / rows.pipeline
