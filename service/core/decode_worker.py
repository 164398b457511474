"""The passes of a disaggregated decode worker: decode steps only, no prompt chunks.

In disaggregated serving (vLLM's, SGLang's and TensorRT-LLM's prefill/decode split, NVIDIA
Dynamo) a prefill worker computes each prompt and hands its KV cache to a decode worker, which
runs a continuous batch of C sequences at mixed progress. Unlike the aggregated continuous batch
(service.core.steady_state), none of its passes carries a prompt chunk: each of the O - 1 decode
passes advances all C running sequences by one token, their contexts spread over P + 1 ...
P + O - 1 as the static batch's are over its steps (attention reads are linear in the context, so
the mean over sequences is the mean over steps). The request's b sequences are b of the C tokens
of every pass: its share of each pass is b / C (its host time and shared weight reads included).
The prefill phase the decode worker's row carries is the static pass of its own prompts, never
quoted: service.core.disaggregated replaces it by the prefill worker's pass and the transfer.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from service.core.steady_state import PassMix

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def decode_worker_mix(
    mix: PassMix, batch: FloatArray, running: FloatArray, decode_only: BoolArray
) -> PassMix:
    """`mix` (the static mix of the `decode_only` rows, as pass_mix gives it for a row not
    continuous) with those rows' decode passes made the decode worker's: `running` [N]
    sequences decoding in every pass, no prompt tokens, the request's `batch` [N] sequences'
    share batch / running. Other rows are unchanged; `mix` itself is not modified."""
    if not decode_only.any():
        return mix
    running = np.where(decode_only, np.maximum(running, batch), mix.running)
    prefilling, decoding, share = mix.prefilling.copy(), mix.decoding.copy(), mix.share.copy()
    prefilling[1] = np.where(decode_only, 0.0, prefilling[1])
    decoding[1] = np.where(decode_only, running, decoding[1])
    share[1] = np.where(decode_only, batch / running, share[1])
    return replace(mix, prefilling=prefilling, decoding=decoding, share=share, running=running)
