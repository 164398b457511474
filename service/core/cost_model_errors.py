"""Typed errors of the cost model; each message says what the caller should change."""

from __future__ import annotations


class CostModelError(ValueError):
    """A request the cost model cannot price as given.

    `field` names the request input at fault (dotted path, e.g. ``workload.prompt_tokens``)
    so the web layer can point at it.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidWorkload(CostModelError):
    """Batch size or token counts out of range."""


class InvalidArchitecture(CostModelError):
    """An architecture whose shapes are inconsistent (e.g. heads not dividing hidden size)."""


class UnsupportedArchitecture(CostModelError):
    """An architecture the kernel graph cannot represent (e.g. hybrid Mamba)."""


class InvalidParallelism(CostModelError):
    """Parallel degrees that do not multiply to the GPU count or do not divide the model."""


class UnsupportedPrecision(CostModelError):
    """A precision that is unknown, or that the chosen GPU cannot run."""


class InsufficientMemory(CostModelError):
    """Weights plus KV cache do not fit the GPUs; `required_gpu_count` says how many would."""

    def __init__(self, message: str, *, required_gpu_count: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.required_gpu_count = required_gpu_count
