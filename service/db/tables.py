"""Tables: quotes and the carbon factor sets they name, idempotency claims, observations of
measured energy, API keys, calibrations, tenants' registered models, and the rate-limit
windows replicas share."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.db.base import Base, DocumentJSON, UTCDateTime, utc_now
from service.db.quote_document import QuoteDocument

TENANT_SCOPE = "tenant"
GLOBAL_SCOPE = "global"


class Quote(Base):
    """One priced request: what was asked, what was answered, and which model answered it."""

    __tablename__ = "quotes"
    __table_args__ = (
        UniqueConstraint("tenant", "idempotency_key"),
        Index("ix_quotes_tenant_created_at_id", "tenant", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # The request's fingerprint, compared when its Idempotency-Key is used again (null: stored
    # without a key, which nothing compares; rows before migration 0009 have one all the same).
    request_hash: Mapped[str | None] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    response: Mapped[dict[str, Any]] = mapped_column(DocumentJSON)
    model_version: Mapped[str] = mapped_column(String(100))
    calibration_id: Mapped[str | None] = mapped_column(String(40))
    model_id: Mapped[str] = mapped_column(String(200))
    gpu_id: Mapped[str] = mapped_column(String(100))
    gpu_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    # The `carbon.factors` of `response`, stored once per distinct set (null: the document
    # holds its factors itself, as rows written before migration 0005 and spooled rows do).
    # Sets are only ever inserted, in the transaction of the first quote naming them, and
    # never changed or deleted: each quote store remembers the sets it saw committed. No
    # foreign key: every insert of a referencing row would lock one of the few, shared set
    # rows (PostgreSQL's FOR KEY SHARE).
    carbon_factor_set_id: Mapped[str | None] = mapped_column(String(64))


class StoredFactorSet(Base):
    """The carbon factors (value, band, unit, source each) some quotes were priced with, as
    the JSON object their answers carried under `carbon.factors`; the id is its text's sha256."""

    __tablename__ = "carbon_factor_sets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    factors: Mapped[dict[str, Any]] = mapped_column(DocumentJSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


@dataclass(slots=True)
class QuoteRow:
    """A new quote to insert, as plain attributes named for the `quotes` columns.

    What the hot path builds instead of a `Quote` instance: the ORM's instrumentation costs tens
    of microseconds per quote to construct, and a new quote is only ever inserted (stored rows
    are read back as `Quote`). Its `response` is the serialised document the caller is answered
    with (`QuoteDocument`, stored without the carbon factors its set id names), or a plain
    dict."""

    id: str
    tenant: str
    idempotency_key: str | None
    request_hash: str | None
    request: dict[str, Any]
    response: QuoteDocument | dict[str, Any]
    model_version: str
    calibration_id: str | None
    model_id: str
    gpu_id: str
    gpu_count: int
    created_at: datetime

    @property
    def carbon_factor_set_id(self) -> str | None:
        """The factor set `response` is stored without (None: a dict, stored whole)."""
        if isinstance(self.response, QuoteDocument):
            return self.response.factors.id
        return None


NewQuote = QuoteRow | Quote
"""Anything the quote inserts, the quote store and the spool take: the columns as attributes."""


class IdempotencyClaim(Base):
    """An Idempotency-Key whose first request is still being priced, visible to every process.

    Inserted before pricing and deleted in the transaction that stores the quote; a claim
    older than the lease (its process died) may be taken over.
    """

    __tablename__ = "idempotency_claims"

    tenant: Mapped[str] = mapped_column(String(100), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    holder: Mapped[str] = mapped_column(String(40))
    claimed_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Observation(Base):
    """Energy and time measured for a quoted request, kept for recalibration."""

    __tablename__ = "observations"
    __table_args__ = (UniqueConstraint("tenant", "idempotency_key"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    quote_id: Mapped[str] = mapped_column(ForeignKey("quotes.id", ondelete="CASCADE"), index=True)
    tenant: Mapped[str] = mapped_column(String(100))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    gpu_j: Mapped[float] = mapped_column(Float)
    total_s: Mapped[float | None] = mapped_column(Float)
    measured_with: Mapped[str] = mapped_column(String(50))
    measured_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class ApiKey(Base):
    """A tenant's key: only its SHA-256 is stored, with a short prefix to name it by."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(100))
    scopes: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Calibration(Base):
    """A fitted calibration (corrections and how they scored in `payload`).

    `scope` is ``tenant`` (fitted on, and applied to, `tenant`'s quotes only) or ``global``
    (fitted on every tenant's observations, applied to tenants without a current calibration
    of their own). At most one is current per scope; `previous_id` is the calibration it
    replaced when it was made current, which a rollback makes current again.
    """

    __tablename__ = "calibrations"
    __table_args__ = (
        Index("ix_calibrations_scope_tenant_is_current", "scope", "tenant", "is_current"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    is_current: Mapped[bool] = mapped_column(Boolean, default=False)
    tenant: Mapped[str] = mapped_column(String(100))
    scope: Mapped[str] = mapped_column(String(10))
    model_version: Mapped[str] = mapped_column(String(100))
    previous_id: Mapped[str | None] = mapped_column(String(40))
    activated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class RegisteredModel(Base):
    """A tenant's own model (POST /v1/models): its config.json as posted and the weights'
    precision it named, priced like a catalogue model for that tenant only."""

    __tablename__ = "registered_models"

    tenant: Mapped[str] = mapped_column(String(100), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    model_type: Mapped[str] = mapped_column(String(100))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    weights: Mapped[str | None] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class RegisteredGpu(Base):
    """A GPU added for every tenant (POST /v1/gpus, operator key): its figures as posted, each
    with its source; what they leave out is filled from the nearest catalogued GPU when read."""

    __tablename__ = "registered_gpus"

    gpu_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    sources: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utc_now)


class RateLimitWindow(Base):
    """Requests counted for one API key under one rate-limit policy in one fixed window, shared
    by every replica on PostgreSQL (service/db/rate_limit_windows.py).

    `window_start_s` is the window's start in Unix seconds, a multiple of its length on the
    database's clock, so that every replica counts into the same row.
    """

    __tablename__ = "rate_limit_windows"
    __table_args__ = (Index("ix_rate_limit_windows_window_start_s", "window_start_s"),)

    key_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    policy: Mapped[str] = mapped_column(String(20), primary_key=True)
    window_start_s: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
