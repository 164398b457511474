"""Fitting and validating the per-kernel cost model on public measurements."""
