"""Quotes the GPU energy, latency and CO2e of an LLM inference request before it runs."""
