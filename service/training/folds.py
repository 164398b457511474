"""Cross-validation folds whose analytical inputs never saw the held-out family.

The regressor corrects the analytical estimate, and the analytical model's coefficients are
themselves fitted on ML.ENERGY. Validating with the committed coefficients would let every fold
peek at its held-out family through them; so each fold refits the cost model without that
family, exactly as ``fit_cost_model``'s leave-one-family-out does (kernel efficiencies on Vidur,
host overheads and power on the end-to-end rows), and encodes every row with those
coefficients.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.coefficients import COEFFICIENTS_PATH, coefficients_from_document
from service.core.coefficients import CostModelCoefficients
from service.fitting.cross_validation import fit_all, with_roofline_values
from service.fitting.datasets import (
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
)
from service.fitting.end_to_end import end_to_end_rows
from service.fitting.kernel_fit import fit_collectives, fit_kernel_efficiencies, kernel_samples

EngineCoefficients = dict[str, CostModelCoefficients]


def refitted_coefficients(data_dir: Path, families: Sequence[str]) -> dict[str, EngineCoefficients]:
    """For each family, the cost model's coefficients (per engine) fitted without it."""
    models, gpus = load_model_catalog(), load_gpu_catalog()
    base = coefficients_from_document(json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8")))
    energy, phases = load_mlenergy(data_dir), load_splitwise(data_dir)
    samples = kernel_samples(load_vidur_kernels(data_dir), models, gpus)
    launch_s = fit_kernel_efficiencies(samples)["kernel_launch_s"]
    network, _, _ = fit_collectives(load_vidur_collectives(data_dir), gpus, launch_s)
    sample_families = np.array(samples.family)
    out: dict[str, EngineCoefficients] = {}
    for family in families:
        keep = sample_families != family
        kernel = fit_kernel_efficiencies(samples.subset(keep))
        coefficients = with_roofline_values(base, {**kernel, **network})
        rows, _ = end_to_end_rows(energy, phases, models, gpus, coefficients)
        train = [r for r in rows if r.family != family]
        fitted = replace(fit_all(samples.subset(keep), network, train), kernel=kernel)
        out[family] = {engine: fitted.coefficients(base, engine) for engine in fitted.overheads}
    return out
