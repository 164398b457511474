"""How long a disaggregated request's prompt waits for its prefill worker.

A decode worker running C sequences of O output tokens replaces each once per life, so it sends
prompts to the prefill workers at lambda = C / (t_p + (O - 1) t_d) per second (t_p the prefill
pass [s], t_d the decode step [s]). `workers_per_decode_worker` = r prefill workers share them,
each computing B prompts per pass of t_p seconds: a deterministic server at load
rho = lambda t_p / (B r), whose mean wait before service is rho / (2 (1 - rho)) x t_p (M/D/1,
as the aggregated batch's prompt queue in service.core.steady_state; rho capped at RHO_MAX, past
which the prefill pool cannot keep up and the decode worker runs fewer sequences than asked).
A request whose decode worker runs only its own sequences (`concurrent_sequences` omitted)
arrives at an idle prefill worker: no wait. The wait is time, not energy: the prefill worker
is computing other requests' prompts meanwhile.
"""

from __future__ import annotations

import numpy as np

from service.core.steady_state import RHO_MAX, md1_wait_services


def prefill_load(
    running: float, output_tokens: int, pass_s: float, decode_step_s: float,
    prompts_per_pass: float, workers_per_decode_worker: float,
) -> float:  # fmt: skip
    """rho [-]: the prefill pool's load from one decode worker's `running` sequences (capped
    at RHO_MAX)."""
    life_s = pass_s + (output_tokens - 1) * decode_step_s
    arrivals_per_s = running / life_s
    rho = arrivals_per_s * pass_s / (prompts_per_pass * workers_per_decode_worker)
    return min(rho, RHO_MAX)


def prefill_wait_s(rho: float, pass_s: float) -> float:
    """Mean wait [s] of a prompt for a prefill worker at load `rho` with passes of `pass_s`."""
    return float(md1_wait_services(np.asarray(rho))) * pass_s
