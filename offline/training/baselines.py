"""The estimators the regressor is compared with, each fitted on the training folds only.

- analytical: the roofline cost model with its engine's fitted coefficients (nothing refitted).
- LLMCarbon-style: energy = FLOPs / (peak x utilisation) x TDP, the request's tensor FLOPs over
  all GPUs at the GPU's dense peak for its precision; one utilisation factor fitted (geometric
  mean of the ratio on the training rows).
- EcoLogits-style: energy per output token = alpha x active parameters + beta (EcoLogits fits
  this line to the ML.ENERGY leaderboard), times output tokens and batch; alpha, beta fitted
  by least squares on relative error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from offline.training.dataset import TrainingRow

FloatArray = npt.NDArray[np.float64]


def analytical_log_j(rows: Sequence[TrainingRow]) -> FloatArray:
    return np.log([r.analytical_j for r in rows])


def served_log_j(rows: Sequence[TrainingRow]) -> FloatArray:
    """The analytical energy the service quotes for each row (continuous reading) [log J]."""
    return np.log([r.served_j for r in rows])


def llmcarbon_log_j(train: Sequence[TrainingRow], test: Sequence[TrainingRow]) -> FloatArray:
    """log energy [J] of `test` with the utilisation fitted on `train`."""
    log_ideal = np.log([r.flops_tdp_per_peak_j for r in train])
    log_utilisation = float(np.mean(log_ideal - np.log([r.measured_j for r in train])))
    return np.log([r.flops_tdp_per_peak_j for r in test]) - log_utilisation


def ecologits_log_j(train: Sequence[TrainingRow], test: Sequence[TrainingRow]) -> FloatArray:
    """log energy [J] of `test` with the per-token line fitted on `train`."""
    per_token = np.array([r.measured_j / (r.batch_size * r.output_tokens) for r in train])
    design = np.column_stack([[r.active_parameters / 1e9 for r in train], np.ones(len(train))])
    # Relative least squares: divide each equation by its measurement.
    (alpha, beta), *_ = np.linalg.lstsq(design / per_token[:, None], np.ones(len(train)))
    tokens = np.array([r.batch_size * r.output_tokens for r in test], dtype=np.float64)
    billions = np.array([r.active_parameters / 1e9 for r in test])
    per_token_j = np.maximum(alpha * billions + beta, 1e-6)
    return np.asarray(np.log(per_token_j * tokens), dtype=np.float64)
