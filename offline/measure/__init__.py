"""Measurement harness: eager PyTorch on NVIDIA GPUs, GPU energy from NVML.

``python -m offline.measure run PLAN [--out measurements.jsonl] [--post URL --key KEY]``
measures a plan's configurations: `plan` reads the plan file and states the request that
prices what is run (engine hf-transformers, one device per GPU), `meter` reads NVML on exactly
the GPUs torch uses, `stability` repeats a phase until its energy is stable, `workload` builds
the architecture with random weights in plain torch, `run` writes (and posts) observations.

``python -m offline.measure.campaign --out DIR`` is the 8-minute campaign on one GPU: kernel
power curves (`campaign_kernels`, `kernel_loop`) and end-to-end models (`campaign_models`)
inside a time budget (`budget`), written with provenance (`campaign_output`).
torch and nvidia-ml-py are imported only when something is measured. docs/measurement.md.
"""
