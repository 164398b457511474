"""The cost model's refusals (its typed errors) as the request's 422s."""

from __future__ import annotations

from service.core.cost_model_errors import (
    CostModelError,
    InsufficientMemory,
    InvalidArchitecture,
    UnsupportedArchitecture,
)
from service.errors import FieldError, InvalidRequest


def invalid_request(error: CostModelError, *, custom: bool) -> InvalidRequest:
    """The core's error as a 422 naming the request field at fault."""
    loc = error.field or "body"
    if isinstance(error, InvalidArchitecture | UnsupportedArchitecture):
        loc = f"architecture.{loc}" if custom else "model"
    extra: dict[str, object] = {"error": type(error).__name__}
    if isinstance(error, InsufficientMemory):
        extra["required_gpu_count"] = error.required_gpu_count
    return InvalidRequest(error.message, errors=[FieldError(loc, error.message)], extra=extra)
