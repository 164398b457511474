"""Pricing: a request resolved against the catalogues, priced by the cost model and the learned
regressor, and written as its quote document."""
