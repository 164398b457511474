"""Offline tools (cost-model fitting, regressor training, the measurement harness, focused
sampling) that import the runtime's `service` package, never the other way round."""
