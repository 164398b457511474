"""Measurement harness: run a measurement plan on an NVIDIA GPU and record GPU energy.

``python -m offline.measure run PLAN [--out measurements.jsonl] [--post URL --key KEY]``.
`plan` reads the plan file, `meter` reads NVML's total-energy counter (nvidia-ml-py, the
``measure`` extra), `stability` repeats a phase until its energy is stable, `workload` builds
the architecture with random weights in plain torch and runs prefill and decode, `records`
writes observations. torch and nvidia-ml-py are imported only when a plan is run.
"""
