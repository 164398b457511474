"""Focused sampling (LLMCO2, Algorithm 1): which configurations to measure next.

`priors` draws candidate configurations (catalogue architectures, Azure-trace prompt and output
lengths, deployed batch sizes and GPU setups); `plan` scores each by where a measurement helps
most, keeps the best, expands their +-C neighbourhoods and writes a measurement plan.
Run it as ``python -m offline.sampling propose --out plan.json [--n 50]``.
"""
