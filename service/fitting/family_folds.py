"""The cost model refitted without one model family: what the leave-one-family-out studies
outside `fit_cost_model` share (the per-row residuals of `service.fitting.residuals`, and the
regressor's folds in `service.training.folds`).

Each fold fits the kernel efficiencies on the other families' Vidur samples, prices every
end-to-end row with them, then fits host overheads and power on the rows of the other families
only, exactly as `cross_validation.cross_validate` does for the committed report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.coefficients import COEFFICIENTS_PATH, coefficients_from_document
from service.catalog.gpus import GpuCatalog
from service.catalog.models import ModelCatalog
from service.core.coefficients import CostModelCoefficients
from service.fitting.cross_validation import FittedModel, fit_all, with_roofline_values
from service.fitting.datasets import (
    EnergyMeasurement,
    PhaseTimeMeasurement,
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
)
from service.fitting.end_to_end import EndToEndRow, end_to_end_rows
from service.fitting.kernel_fit import (
    KernelSamples,
    fit_collectives,
    fit_kernel_efficiencies,
    kernel_samples,
)


@dataclass(frozen=True)
class FoldData:
    """Catalogues, committed coefficients, measurements, and the collective fit (which no
    family's rows enter), loaded once for every fold."""

    models: ModelCatalog
    gpus: GpuCatalog
    base: CostModelCoefficients
    energy: list[EnergyMeasurement]
    phases: list[PhaseTimeMeasurement]
    samples: KernelSamples
    sample_families: npt.NDArray[np.str_]
    network: dict[str, float]

    @classmethod
    def load(cls, data_dir: Path) -> FoldData:
        models, gpus = load_model_catalog(), load_gpu_catalog()
        base = coefficients_from_document(json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8")))
        samples = kernel_samples(load_vidur_kernels(data_dir), models, gpus)
        launch_s = fit_kernel_efficiencies(samples)["kernel_launch_s"]
        network, _, _ = fit_collectives(load_vidur_collectives(data_dir), gpus, launch_s)
        return cls(
            models,
            gpus,
            base,
            load_mlenergy(data_dir),
            load_splitwise(data_dir),
            samples,
            np.array(samples.family),
            network,
        )


@dataclass(frozen=True)
class FamilyFit:
    """One fold: the model fitted without `family`, the coefficients its kernel fit gives (what
    held-out rows are priced with) and every end-to-end row priced with them."""

    family: str
    model: FittedModel
    coefficients: CostModelCoefficients
    rows: list[EndToEndRow]


def fit_without(data: FoldData, family: str) -> FamilyFit:
    """Refit the cost model on everything but `family`'s kernel samples and rows."""
    keep = data.sample_families != family
    kernel = fit_kernel_efficiencies(data.samples.subset(keep))
    coefficients = with_roofline_values(data.base, {**kernel, **data.network})
    rows, _ = end_to_end_rows(data.energy, data.phases, data.models, data.gpus, coefficients)
    train = [r for r in rows if r.family != family]
    model = replace(fit_all(data.samples.subset(keep), data.network, train), kernel=kernel)
    return FamilyFit(family, model, coefficients, rows)
