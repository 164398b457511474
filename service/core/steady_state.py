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
time. The request's prefill is b N tokens of one pass (share b N / T), its decode b tokens of
each of O - 1 passes (share b / T); per sequence that is O / C of one pass's energy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
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
    """

    prefilling: FloatArray
    decoding: FloatArray
    mean_context: FloatArray
    steps: FloatArray
    share: FloatArray
    running: FloatArray
    new_tokens: FloatArray
    continuous: BoolArray


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
) -> PassMix:
    """The passes of workloads of `batch` sequences each (per wave), `running` sequences in a
    continuous batch where `continuous` (else ignored) [N each]."""
    new = computed_prompt_tokens(prompt, cached)
    decode_steps = output - 1.0
    prefilling = np.empty((2, batch.shape[0]))
    decoding = np.empty_like(prefilling)
    share = np.ones_like(prefilling)
    # Continuous: C / O prompts and C (O - 1) / O decode tokens in every pass.
    arriving = running / output
    advancing = running * decode_steps / output
    prefilling[0] = np.where(continuous, arriving, batch)
    prefilling[1] = np.where(continuous, arriving, 0.0)
    decoding[0] = np.where(continuous, advancing, 0.0)
    decoding[1] = np.where(continuous, advancing, batch)
    tokens = advancing + arriving * new
    share[0] = np.where(continuous, batch * new / tokens, 1.0)
    share[1] = np.where(continuous, batch / tokens, 1.0)
    steps = np.empty_like(prefilling)
    steps[0], steps[1] = 1.0, decode_steps
    return PassMix(
        prefilling=prefilling,
        decoding=decoding,
        mean_context=prompt + output / 2.0,
        steps=steps,
        share=share,
        running=np.where(continuous, running, batch),
        new_tokens=new,
        continuous=continuous,
    )
