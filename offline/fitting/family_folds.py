"""The cost model refitted without one model family: what the leave-one-family-out studies
outside `fit_cost_model` share (the per-row residuals of `offline.fitting.residuals`, and the
regressor's folds in `offline.training.folds`).

Each fold is `cross_validation.refit_without`, the refit behind the committed report's
leave-one-family-out: kernel efficiencies on the other families' Vidur samples, every
end-to-end row priced with them, host overheads and power on the other families' rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from offline.fitting.cross_validation import Refit, refit_without
from offline.fitting.datasets import (
    EnergyMeasurement,
    PhaseTimeMeasurement,
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
)
from offline.fitting.end_to_end import EndToEndRow
from offline.fitting.kernel_fit import (
    KernelSamples,
    fit_collectives,
    fit_kernel_efficiencies,
    kernel_samples,
)
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import COEFFICIENTS_PATH, coefficients_from_document
from service.catalog.gpus import GpuCatalog
from service.catalog.models import ModelCatalog
from service.core.coefficients import CostModelCoefficients


@dataclass(frozen=True)
class FoldData:
    """Catalogues, committed coefficients, measurements, and the collective fit (which no
    family's rows enter), loaded once for every fold. `static`: fit on the ML.ENERGY rows'
    older, static reading (end_to_end.end_to_end_rows)."""

    models: ModelCatalog
    gpus: GpuCatalog
    base: CostModelCoefficients
    energy: list[EnergyMeasurement]
    phases: list[PhaseTimeMeasurement]
    samples: KernelSamples
    sample_families: npt.NDArray[np.str_]
    network: dict[str, float]
    static: bool = False

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


def fit_without(data: FoldData, family: str) -> Refit:
    """Refit the cost model on everything but `family`'s kernel samples and rows."""
    return fit_without_group(data, _family_of, family, data.sample_families != family, "family")


def fit_without_group(
    data: FoldData,
    group_of: Callable[[EndToEndRow], str],
    group: str,
    kept_samples: npt.NDArray[np.bool_],
    what: str,
) -> Refit:
    """Refit the cost model on the kernel samples `kept_samples` marks and the end-to-end rows
    whose `group_of` is not `group` (`what` names the grouping in the error)."""
    refit = refit_without(
        group_of,
        group,
        kept_samples,
        data.samples,
        data.network,
        data.base,
        (data.energy, data.phases),
        data.models,
        data.gpus,
        static=data.static,
    )
    if refit is None:
        raise ValueError(f"no end-to-end row outside {what} {group!r} to fit on")
    return refit


def _family_of(row: EndToEndRow) -> str:
    return row.family


def gpu_of_row(row: EndToEndRow) -> str:
    """The GPU grouping of fit_without_group (leave one GPU out)."""
    return row.gpu_id


def engine_of_row(row: EndToEndRow) -> str:
    """The engine grouping of fit_without_group (leave one engine out)."""
    return row.engine
