"""Validating the cost model against measured data it was not fitted on."""
