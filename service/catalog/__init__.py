"""Reference data (GPUs, models, fitted coefficients) as versioned files with their sources,
loaded once into small read-only repositories."""

from service.catalog.engines import (
    DEFAULT_ENGINE,
    load_cost_model_coefficients,
    load_engine_coefficients,
)
from service.catalog.gpus import GpuCatalog, GpuRecord, load_gpu_catalog
from service.catalog.models import ModelCatalog, ModelRecord, load_model_catalog

__all__ = [
    "DEFAULT_ENGINE",
    "GpuCatalog",
    "GpuRecord",
    "ModelCatalog",
    "ModelRecord",
    "load_cost_model_coefficients",
    "load_engine_coefficients",
    "load_gpu_catalog",
    "load_model_catalog",
]
