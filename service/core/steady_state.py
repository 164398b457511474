"""How a request's sequences share forward passes: a static batch alone, or a continuous batch
in steady state, for N workloads at once.

Static (`concurrent_sequences` omitted): prefill is one pass of the batch's b prompts; decode is
O - 1 passes of its b sequences, the context growing from P + 1 to P + O - 1 keys. The request
causes every joule.

Continuous (C running sequences, the request's b among them): every sequence lives O passes (the
pass that computes its prompt and yields its first token, then O - 1 decode passes), so in
steady state a pass carries C / O sequences' prompts (chunked prefill, as vLLM V1 and SGLang
co-schedule them with decode) and advances C (O - 1) / O sequences by one token, whose contexts
are spread evenly over P + 1 ... P + O - 1 (the other sequences taken like this request's: the
only ones the caller describes). One such mean pass is priced; its time is the request's time
per output token and its time to first token, O passes its whole latency. Its energy is
shared over the pass's tokens T = C (O - 1) / O + (C / O) N (N = prompt tokens computed): every
token of a pass, prompt or decode, carries an equal share of its shared weight reads and host
time. The request's decode is b tokens of each of O - 1 mean passes (share b / T); its prompt,
one of the C / O arrivals a mean pass carries, is b N tokens of that same pass (share b N / T;
`prompt_to_decode_energy`), so the request's energy is b O / C of one mean pass: over O passes
its C running sequences are replaced once, and every joule goes to one of them. The passes
that carry its own prompt chunks are priced for the time to first token only: their share
b N / T' (T' = T + its chunk) charges the request less than its prompt's part of the steady
state (the chunk pass's weight reads and host time spread over its larger token count).

Time to first token (chunked prefill, as vLLM V1, SGLang and TensorRT-LLM schedule it): a pass
carries at most B tokens (the engine's token budget per step, `Deployment.prefill_budget_tokens`),
the running sequences' decode tokens D = C (O - 1) / O first, prompt chunks in what is left,
b_p = B - D. The request's b N prompt tokens therefore take n = ceil(b N / b_p) passes, each
carrying its chunk b N / n and, as far as the budget allows, the C / O prompts that arrive per
pass on average (arrivals do not wait for the request's): these n passes are the prefill phase
(their energy shared as above, per token). Before its first chunk the
request waits for the pass in progress (half a pass on average) and for the prompts queued
ahead: prompts arrive at C / O per pass, each taking N / b_p passes of the budget, a
deterministic server at load rho = (C N / O) / b_p, whose mean wait is
rho / (2 (1 - rho)) x N / b_p passes (M/D/1; rho capped at RHO_MAX). Those waiting passes are
other sequences' work: they add time to first token, not energy.

Arrivals in a wave (closed-loop clients, as serving benchmarks run them, send their sequences
together at start and keep them bunched while every sequence has the same lengths): the
request comes with the other C / r - b prompts of its replica (r attention-data-parallel
replicas) and is, on average, in the middle of them. Chunked prefill fills each pass's budget
B with the wave's prompts in turn, so the wave's W = (C / r) N tokens take W / B passes and a
request's first token comes, on average, after min(W, (W + B) / 2) of them (one pass when the
wave fits in it: every prompt of the pass waits for the whole pass); less its own b N tokens,
which its prefill passes already price, that is `wave_passes` passes of its prefill phase's
mean token count. The share of arrivals that come in a wave is the engine's
`RooflineCoefficients.ttft_wave_share`, fitted on measured serving runs: the rest arrive spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
RHO_MAX = 0.9
"""Highest prefill load priced (its wait is 4.5 prompts' prefill): beyond it the budget cannot
keep up with the arrivals and the queue grows until fewer sequences run than asked."""


def md1_wait_services(load: FloatArray) -> FloatArray:
    """Mean wait before service of a deterministic single server with Poisson arrivals (M/D/1)
    at `load` rho < 1, in service times: rho / (2 (1 - rho))."""
    wait: FloatArray = load / (2.0 * (1.0 - load))
    return wait


# Not frozen: built on every pass, and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (several times the cost); treated as read-only all the same.
@dataclass(slots=True, eq=False)
class PassMix:
    """Per phase (0 prefill, 1 decode) and workload, [2, N] unless said:

    Attributes:
        prefilling: sequences whose prompt one pass computes [sequences].
        decoding: sequences one pass advances by a token [sequences].
        mean_context: the decoding sequences' mean context [keys] ([N]); a continuous
            prefill pass reads it whole, decode passes sum it over the context range.
        steps: passes per phase (prefill 1, decode O - 1).
        share: the request's share of each phase's energy [-].
        running: sequences in every pass ([N]; host time per sequence).
        new_tokens: prompt tokens computed per sequence ([N]; prompt minus cache hits).
        continuous: [N] whether the workload runs in a continuous batch.
        waiting: [N] mean passes of other sequences' work before the request's first chunk
            (0 in a static batch) [passes].
        wave_passes: [N] prefill passes (of the request's prefill phase's size) of the prompts
            ahead of the request when it arrives in a wave (0 in a static batch) [passes].
        any_continuous: whether any workload is continuous (else their branches are skipped).
        all_continuous: whether every workload is, when known (their static sides skipped).
    """

    prefilling: FloatArray
    decoding: FloatArray
    mean_context: FloatArray
    steps: FloatArray
    share: FloatArray
    running: FloatArray
    new_tokens: FloatArray
    continuous: BoolArray
    waiting: FloatArray
    wave_passes: FloatArray
    any_continuous: bool = True
    all_continuous: bool = False


def computed_prompt_tokens(prompt: FloatArray, cached: FloatArray) -> FloatArray:
    """Prompt tokens prefill computes [tokens]: the prompt less its cache hits, at least the
    last one (engines recompute it to produce the first output token)."""
    result: FloatArray = prompt - np.minimum(cached, prompt - 1.0)
    return result


def pass_mix(
    batch: FloatArray,
    prompt: FloatArray,
    cached: FloatArray,
    output: FloatArray,
    running: FloatArray,
    continuous: BoolArray,
    budget: float | FloatArray = np.inf,
    replicas: float | FloatArray = 1,
    *,
    any_continuous: bool | None = None,
    all_continuous: bool = False,
) -> PassMix:
    """The passes of workloads of `batch` sequences each (per wave), `running` sequences in a
    continuous batch where `continuous` (else ignored), at most `budget` tokens per pass of
    each of `replicas` attention-data-parallel schedulers (each runs 1 / replicas of the
    sequences; the request's prompt is one replica's) [N each]. `any_continuous`: whether any
    row is continuous, when the caller knows it; `all_continuous`: True when it knows every
    row is (a serving pass's common case: the static sides of the wheres are then skipped)."""
    new = computed_prompt_tokens(prompt, cached)
    decode_steps = output - 1.0
    if not (continuous.any() if any_continuous is None else any_continuous):
        return _static_mix(batch, prompt, output, new, continuous)

    def pick(continuous_value: FloatArray, static_value: FloatArray | float) -> FloatArray:
        """Each row's value of its kind: np.where(continuous, ...), unless all are."""
        if all_continuous:
            return continuous_value
        picked: FloatArray = np.where(continuous, continuous_value, static_value)
        return picked

    prefilling = np.empty((2, batch.shape[0]))
    decoding = np.empty(prefilling.shape)
    share = np.empty(prefilling.shape)
    # Continuous: C / O prompts and C (O - 1) / O decode tokens in every pass; the request's
    # prompt in n passes of the budget left beside the decode tokens.
    running = pick(running, batch)  # static: unused, kept finite
    arriving = running / output
    advancing = running * decode_steps / output
    left = np.maximum(budget - advancing / replicas, 1.0)
    chunks = np.maximum(np.ceil(batch * new / left), 1.0)
    own = batch / chunks
    carried = np.minimum(own + arriving, np.maximum(left / new, own))
    prefilling[0] = pick(carried, batch)
    prefilling[1] = pick(arriving, 0.0)
    decoding[0] = pick(advancing, 0.0)
    decoding[1] = pick(advancing, batch)
    first = advancing + carried * new
    share[0] = pick(batch * new / (chunks * first), 1.0)
    share[1] = pick(batch / (advancing + arriving * new), 1.0)
    steps = np.empty(prefilling.shape)
    steps[0] = pick(chunks, 1.0)
    steps[1] = decode_steps
    load = np.minimum(arriving / replicas * new / left, RHO_MAX)
    queued = md1_wait_services(load) * new / left
    wave = running / replicas * new
    ahead = np.maximum(np.minimum(wave, (wave + budget) / 2.0) - batch * new, 0.0)
    per_pass = advancing / replicas + carried * new  # tokens of one of its prefill passes
    return PassMix(
        prefilling=prefilling,
        decoding=decoding,
        mean_context=prompt + output / 2.0,
        steps=steps,
        share=share,
        running=running,
        new_tokens=new,
        continuous=continuous,
        waiting=pick(0.5 + queued, 0.0),
        wave_passes=pick(ahead / per_pass, 0.0),
        all_continuous=all_continuous,
    )


def prompt_to_decode_energy(mix: PassMix, output: FloatArray) -> FloatArray:
    """[N] a continuous-batch request's prefill energy over its decode energy: its b N prompt
    tokens against its b (O - 1) decode tokens of the same mean pass, N / (O - 1). NaN where
    the request is in a static batch or has no decode pass (one output token): its prefill is
    then priced on its own passes."""
    steps = output - 1.0
    conserved = mix.continuous & (steps > 0)
    ratio: FloatArray = np.where(conserved, mix.new_tokens / np.maximum(steps, 1.0), np.nan)
    return ratio


def _static_mix(
    batch: FloatArray, prompt: FloatArray, output: FloatArray, new: FloatArray, static: BoolArray
) -> PassMix:
    """pass_mix of static batches only (`static` all False): what its continuous-batch terms
    reduce to where no row is continuous, without computing them."""
    n = batch.shape[0]
    prefilling, decoding = np.zeros((2, n)), np.zeros((2, n))
    prefilling[0] = decoding[1] = batch  # the batch's prompts in one pass; all of it decoding
    steps = np.empty((2, n))
    steps[0], steps[1] = 1.0, output - 1.0
    share = np.empty((2, n))
    share.fill(1.0)  # the request causes every joule (np.ones, without its Python-level cost)
    return PassMix(
        prefilling=prefilling,
        decoding=decoding,
        mean_context=prompt + output / 2.0,
        steps=steps,
        share=share,
        running=batch.copy(),
        new_tokens=new,
        continuous=static,
        waiting=np.zeros(n),
        wave_passes=np.zeros(n),
        any_continuous=False,
    )
