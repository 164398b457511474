"""GPUs the operator adds for every tenant (POST /v1/gpus), their listing beside the catalogue
(GET /v1/gpus), and the lookup that lets an estimate name one like a catalogue GPU.

A registered GPU is stored as posted (its figures and their sources) and read through the same
filling as an estimate's `hardware.spec` (service/catalog/gpu_spec.py): what it leaves out comes
from the nearest catalogued GPU, and its quotes say so. Registered GPUs are never replaced or
removed, so a process that has read one keeps it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.catalog.gpu_spec import gpu_from_spec
from service.catalog.gpus import GpuCatalog, GpuRecord
from service.db.engine import Database
from service.db.gpu_registry import RegisteredGpuRepository
from service.db.tables import RegisteredGpu
from service.errors import Conflict, DatabaseUnavailable
from service.schemas.gpu_spec import RegisterGpuIn

UNLISTED_WARNING = "the database is unavailable: GPUs added with POST /v1/gpus are not listed"


def register_gpu(session: Session, catalog: GpuCatalog, body: RegisterGpuIn) -> GpuRecord:
    """Store `body` as a GPU for every tenant; its record. Conflict (409) when the id is a
    catalogue GPU's (or alias) or registered already."""
    if catalog.has(body.id):
        raise Conflict(f"{body.id} is a catalogue GPU; register the GPU under another id")
    repository = RegisteredGpuRepository(session)
    if repository.named([body.id]):
        raise Conflict(f"GPU {body.id} is registered already")
    spec = body.model_dump(exclude={"sources"}, exclude_none=True)
    row = repository.add(RegisteredGpu(gpu_id=body.id, spec=spec, sources=dict(body.sources)))
    return registered_record(catalog, row)


def registered_record(catalog: GpuCatalog, row: RegisteredGpu) -> GpuRecord:
    """The catalogue-shaped record of a registered GPU, filled from the nearest catalogued one
    (`registered: true`, its quotes' warning in `notes`)."""
    described = gpu_from_spec(catalog, row.spec, row.sources)
    raw = dict(described.record.raw)
    raw.update(registered=True, notes=[described.note("POST /v1/gpus")])
    return GpuRecord(described.record.spec, raw)


def registered_gpus(database: Database, catalog: GpuCatalog) -> tuple[list[GpuRecord], list[str]]:
    """Every registered GPU's record, and warnings: with the database away, none and a warning
    saying so (the catalogue still answers)."""
    try:
        with database.sessions() as session:
            rows = RegisteredGpuRepository(session).all()
            return [registered_record(catalog, row) for row in rows], []
    except SQLAlchemyError:
        return [], [UNLISTED_WARNING]


def registered_gpu(session: Session, catalog: GpuCatalog, gpu_id: str) -> GpuRecord | None:
    """The record of the registered GPU `gpu_id`, or None."""
    rows = RegisteredGpuRepository(session).named([gpu_id])
    return registered_record(catalog, rows[0]) if rows else None


def gpus_named(
    database: Database, catalog: GpuCatalog, names: Collection[str]
) -> list[GpuRecord] | DatabaseUnavailable:
    """The registered GPUs among `names` (GPU ids the catalogue lacks, named by estimates), or,
    with the database away, the 503 those estimates get (they may name a registered GPU)."""
    try:
        with database.sessions() as session:
            rows = RegisteredGpuRepository(session).named(names)
            return [registered_record(catalog, row) for row in rows]
    except SQLAlchemyError:
        return DatabaseUnavailable(
            "the database holding registered GPUs is unavailable; retry later",
            headers={"Retry-After": str(round(database.settings.retry_after_s))},
        )


def description(record: GpuRecord) -> dict[str, Any]:
    """What GET /v1/gpus shows of a registered GPU."""
    return dict(record.raw)
