"""The queries of registered GPUs (global: the operator's, seen by every tenant). They flush,
never commit."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.tables import RegisteredGpu


class RegisteredGpuRepository:
    """GPUs added with POST /v1/gpus, looked up by id case-insensitively (as catalogue ids are)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, gpu: RegisteredGpu) -> RegisteredGpu:
        self.session.add(gpu)
        self.session.flush()
        return gpu

    def all(self) -> list[RegisteredGpu]:
        """Every registered GPU, by id."""
        return list(self.session.scalars(select(RegisteredGpu).order_by(RegisteredGpu.gpu_id)))

    def named(self, gpu_ids: Collection[str]) -> list[RegisteredGpu]:
        """The registered GPUs among `gpu_ids` (case-insensitive)."""
        wanted = {gpu_id.strip().lower() for gpu_id in gpu_ids}
        return [gpu for gpu in self.all() if gpu.gpu_id.lower() in wanted]
