"""The cost model refitted without one GPU family's rows and kernel samples (the
leave-one-GPU-out fold of `fit_cost_model`), written as a coefficients file the service can
serve (`QUOTES_COST_MODEL_COEFFICIENTS_PATH`): what a GPU the fit never saw is quoted with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from offline.fitting.cross_validation import overhead_values, refit_without
from offline.fitting.datasets import (
    load_mlenergy,
    load_splitwise,
    load_vidur_collectives,
    load_vidur_kernels,
)
from offline.fitting.kernel_fit import fit_collectives, fit_kernel_efficiencies, kernel_samples
from service.catalog import load_gpu_catalog, load_model_catalog
from service.catalog.engines import (
    COEFFICIENTS_PATH,
    DEFAULT_ENGINE,
    coefficients_from_document,
)


def fold_coefficients(data: Path, held_out_gpu: str, folder: Path) -> Path:
    """The cost model refitted without every row and sample of `held_out_gpu`'s family (an
    A100-SXM4-40GB takes every A100 out), written into `folder` as a coefficients file (the
    shipped file's layout, the fold's values where the fold fits them); its path."""
    models, gpus = load_model_catalog(), load_gpu_catalog()
    shipped = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    base = coefficients_from_document(shipped)
    energy, phases = load_mlenergy(data), load_splitwise(data)
    samples = kernel_samples(load_vidur_kernels(data), models, gpus)
    kernel = fit_kernel_efficiencies(samples)
    network, _, _ = fit_collectives(load_vidur_collectives(data), gpus, kernel["kernel_launch_s"])
    family = held_out_gpu.split("-")[0]
    keep = np.array([g.split("-")[0] != family for g in samples.gpu_id])
    refit = refit_without(
        lambda r: r.gpu_id.split("-")[0],
        family,
        keep,
        samples,
        network,
        base,
        (energy, phases),
        models,
        gpus,
    )
    if refit is None:
        raise RuntimeError("no row left to fit without the held-out GPU")
    fold = refit.model
    engines = dict(shipped["engines"])
    for engine in fold.overheads:
        if engine in engines:
            engines[engine] = {**engines[engine], **fold.engine_values(engine)}
    document = {
        **shipped,
        "version": f"{shipped['version']} without {family}",
        "roofline": {
            **shipped["roofline"],
            **fold.kernel,
            **fold.network,
            **overhead_values(fold.overheads[DEFAULT_ENGINE]),
        },
        "engines": engines,
        "power": fold.power_values(DEFAULT_ENGINE),
    }
    path = folder / f"coefficients_without_{family}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path
