"""Measured energy posted back for a quote, stored once per Idempotency-Key."""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.db.base import utc_now
from service.db.ids import new_observation_id
from service.db.repositories import ObservationRepository, QuoteRepository
from service.db.tables import Observation
from service.errors import IdempotencyMismatch, NotFound
from service.quotes.idempotency import fingerprint
from service.schemas.quotes import ObservationIn


def record_observation(
    session: Session,
    tenant: str,
    quote_id: str,
    body: ObservationIn,
    idempotency_key: str | None,
) -> Observation:
    """Add the observation (flushed, committed by the request's session) or return the one
    already stored under `idempotency_key`."""
    quote = QuoteRepository(session).get(tenant, quote_id)
    if quote is None:
        raise NotFound(f"no quote {quote_id!r}")
    repository = ObservationRepository(session)
    body_hash = fingerprint({"quote_id": quote_id, **body.model_dump(mode="json")})
    if idempotency_key is not None:
        existing = repository.by_idempotency_key(tenant, idempotency_key)
        if existing is not None:
            if existing.request_hash != body_hash:
                raise IdempotencyMismatch(
                    "this Idempotency-Key was already used with a different observation"
                )
            return existing
    return repository.add(
        Observation(
            id=new_observation_id(),
            quote_id=quote.id,
            tenant=tenant,
            idempotency_key=idempotency_key,
            request_hash=body_hash,
            gpu_j=body.gpu_j,
            total_s=body.total_s,
            measured_with=body.measured_with,
            measured_at=body.measured_at,
            created_at=utc_now(),
        )
    )
