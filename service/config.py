"""Service settings: one BaseSettings, read from `QUOTES_*` environment variables at start-up."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal, Self

from pydantic import (
    AliasChoices,
    Field,
    IPvAnyNetwork,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./var/quotes.sqlite3"
MAX_BATCH_ITEMS = 1000  # API.md: a batch holds up to 1000 items
# Requests per window (1 s by default) and API key, by the scope a route requires.
DEFAULT_RATE_LIMITS = {"estimate": 1000, "billing": 100, "observe": 500, "admin": 20}


class Settings(BaseSettings):
    """Everything the web layer can be configured with; the core never reads settings."""

    model_config = SettingsConfigDict(env_prefix="QUOTES_", extra="ignore", frozen=True)

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        validation_alias=AliasChoices("QUOTES_DATABASE_URL", "DATABASE_URL", "database_url"),
        description="SQLAlchemy URL; SQLite file under ./var by default, PostgreSQL via psycopg.",
    )
    run_migrations_on_start: bool = True
    db_connect_timeout_s: PositiveFloat = 3.0
    db_pool_timeout_s: PositiveFloat = 2.0
    db_statement_timeout_ms: PositiveInt = 5000
    sqlite_busy_timeout_ms: PositiveInt = 2000
    sqlite_lock_backoff_s: PositiveFloat = Field(
        default=2.0,
        description="After a write waited out the busy timeout (another process holds the "
        "write lock), writes fail at once for this long [s] instead of each waiting again "
        "(service/db/sqlite_guard.py).",
    )
    sqlite_checkpoint_interval_s: float = Field(
        default=0.1,
        ge=0,
        description="SQLite with `sqlite_commit_in_loop`: a background thread checkpoints the "
        "WAL this often [s], so that the event loop's commits do not (service/db/"
        "wal_checkpoints.py); 0 leaves checkpoints to SQLite, inside the commit that takes the "
        "WAL past 1,000 pages.",
    )
    sqlite_commit_in_loop: bool = Field(
        default=True,
        description="SQLite: commit the estimates' quotes in the event loop thread itself, one "
        "transaction per loop iteration, instead of handing them to the sink's thread; a "
        "commit that finds the write lock taken goes to the sink's thread, which waits for it "
        "(service/quotes/sqlite_sink.py).",
    )
    postgres_commit_in_loop: bool = Field(
        default=True,
        description="PostgreSQL: commit the estimates' quotes from the event loop on an asyncio "
        "connection, one statement per group, the groups arriving meanwhile committed together "
        "next, instead of handing them to the sink's thread; a failed attempt hands the group "
        "to the sink's thread to spool and leaves it the next second's groups "
        "(service/quotes/postgres_sink.py).",
    )
    db_reconnect_backoff_s: PositiveFloat = Field(
        default=2.0,
        description="After a failed connection attempt, new ones fail at once for this long "
        "[s], then one probe at a time: requests do not each wait out the connect timeout.",
    )
    retry_after_s: PositiveInt = 5
    max_body_bytes: PositiveInt = 2 * 1024 * 1024
    gzip_min_bytes: NonNegativeInt = Field(
        default=64 * 1024,
        description="Answers at least this large are gzipped for clients that accept it (0: "
        "never). Single quotes (about 8 KB) stay plain: compressing one costs more CPU than "
        "its bytes cost a gateway on the same network; batch answers run to megabytes.",
    )
    body_read_timeout_s: PositiveFloat = Field(
        default=10.0,
        description="A request body not received whole within this time of the request's start "
        "is refused with 408 [s]; requests wait for a load-shedding slot only once it is in.",
    )
    max_batch_items: int = Field(
        default=MAX_BATCH_ITEMS, ge=1, le=MAX_BATCH_ITEMS, description="At most 1000 (API.md)."
    )
    max_verbose_batch_items: int = Field(
        default=100,
        ge=1,
        le=MAX_BATCH_ITEMS,
        description="At most this many items in a `verbose=true` batch: each verbose answer holds "
        "its per-kernel table (24-30 KB, against about 8 KB), and a worker holds a batch's "
        "answers whole until sent.",
    )
    require_api_key: bool = Field(
        default=False,
        description="Refuse the open dev mode even when no API key exists (production).",
    )
    api_key_mode_ttl_s: float = Field(
        default=5.0, ge=0, description="How long the 'any key configured?' answer is cached [s]."
    )
    api_key_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a worker trusts a key it read from the database [s]: a revoked key "
        "is refused everywhere within this time. 0 reads the database on every request.",
    )
    spool_dir: Path | None = Field(
        default=None,
        description="Durable local spool for quotes the database refuses (a persistent volume); "
        "off by default, when such quotes are answered with quote_id null.",
    )
    spool_replay_interval_s: PositiveFloat = 5.0
    billing_settle_s: float = Field(
        default=10.0,
        ge=0,
        description="The billing pull only returns quotes older than this [s], so that no quote "
        "can commit behind a page already read; must exceed the longest insert (statement or "
        "SQLite busy timeout) plus clock skew between instances. 0 turns it off (tests only).",
    )
    idempotency_lease_s: PositiveFloat = Field(
        default=20.0,
        description="How long an Idempotency-Key claimed by a request that never finished (a "
        "crashed process) blocks other processes with 409 [s]; must exceed the longest estimate.",
    )
    calibration_refresh_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a worker prices with the current calibrations it last read [s] "
        "before reading them again (another worker's new calibration shows after this).",
    )
    # The learned energy regressor: one onnxruntime session per process. Unset paths mean the
    # model shipped in models/; `use_regressor=false` quotes with the analytical model alone.
    use_regressor: bool = True
    # The cost model's fitted coefficients (unset: the packaged file; another fit's, such as a
    # fold of a validation that holds a GPU out).
    cost_model_coefficients_path: Path | None = None
    onnx_model_path: Path | None = None
    onnx_metadata_path: Path | None = None
    onnx_intra_op_threads: PositiveInt = 1
    onnx_inter_op_threads: PositiveInt = 1
    # Overload shedding, per worker process (service/api/load_shedding.py).
    shed_max_concurrent: int = Field(
        default=32,
        ge=0,
        description="Requests a worker processes at once, their quotes' commit included; 0 turns "
        "shedding off. A slot is held while the request waits for the pricing thread and while "
        "it waits on its group commit, so it must cover a few ms of commit wait under load.",
    )
    shed_max_queued: int = Field(
        default=64, ge=0, description="Requests that may wait for a slot; more get 503 at once."
    )
    shed_max_queue_wait_s: PositiveFloat = Field(
        default=0.1, description="Longest wait for a slot [s] before the request gets 503."
    )
    shed_retry_after_s: PositiveInt = 1
    # Per-client caps, per worker process (service/api/client_caps.py), so that one stalled or
    # greedy client cannot hold every shedding slot and queue place.
    client_max_in_flight_per_ip: NonNegativeInt | None = Field(
        default=None,
        description="Requests one client IP may have in flight in a worker at once (its body "
        "read included); more get 429 at once. 0: no cap; unset: half the worker's shedding "
        "slots and queue places together (48 by default). Behind a reverse proxy, set "
        "`client_trusted_proxies` or every request counts against the proxy's address.",
    )
    client_max_in_flight_per_key: NonNegativeInt | None = Field(
        default=None,
        description="Requests one API key may have in flight in a worker at once; more get 429 "
        "at once. 0: no cap; unset: as the per-IP default.",
    )
    client_trusted_proxies: tuple[IPvAnyNetwork, ...] = Field(
        default=(),
        description="Networks of the reverse proxies whose `X-Forwarded-For` names the client "
        "(JSON in env: QUOTES_CLIENT_TRUSTED_PROXIES='[\"10.0.0.0/8\"]'); empty: the socket "
        "peer is the client and the header is ignored.",
    )
    log_level: str = "INFO"
    otel_enabled: bool = Field(
        default=False,
        description="Trace requests with OpenTelemetry (the `otel` extra), exported over OTLP.",
    )
    otel_service_name: str = "llm-energy-quotes"
    log_format: Literal["json", "text"] = Field(
        default="json",
        description="`json` (one object per line, with the request id) or `text`.",
    )
    # Per-key rate limits (service/api/rate_limit.py): requests per window by the
    # scope a route requires. Given scopes override these defaults; 0 leaves a scope unlimited.
    rate_limits: dict[str, NonNegativeInt] = Field(
        default=DEFAULT_RATE_LIMITS,
        description="Requests per `rate_limit_window_s` and API key, by route scope (JSON in env: "
        "QUOTES_RATE_LIMITS='{\"estimate\": 200}'); the scopes left out keep their defaults.",
    )
    rate_limit_window_s: PositiveInt = 1
    rate_limit_shared: bool = Field(
        default=True,
        description="On PostgreSQL, count rate limits in the database, shared by every worker "
        "and replica (one upsert per keyed request); false: per process, as on SQLite.",
    )
    rate_limit_key_quotas: dict[str, PositiveInt] = Field(
        default_factory=dict,
        description="Per-key quota overriding the scope's, by the key's display prefix.",
    )

    def client_caps(self) -> tuple[int, int]:
        """(per IP, per key) requests in flight; an unset cap is half of the shedding slots and
        queue places, so that others can always queue behind one client (0 without shedding)."""
        half = (self.shed_max_concurrent + self.shed_max_queued) // 2
        if self.shed_max_concurrent == 0:
            half = 0
        per_ip, per_key = self.client_max_in_flight_per_ip, self.client_max_in_flight_per_key
        return (half if per_ip is None else per_ip, half if per_key is None else per_key)

    @field_validator("rate_limits", mode="after")
    @classmethod
    def _over_the_default_limits(cls, given: dict[str, int]) -> dict[str, int]:
        unknown = set(given) - set(DEFAULT_RATE_LIMITS)
        if unknown:
            raise ValueError(f"unknown scopes {sorted(unknown)}; use {sorted(DEFAULT_RATE_LIMITS)}")
        return {**DEFAULT_RATE_LIMITS, **given}

    @model_validator(mode="after")
    def _windows_cover_the_longest_write(self) -> Self:
        longest_insert_s = max(self.db_statement_timeout_ms, self.sqlite_busy_timeout_ms) / 1000
        if 0 < self.billing_settle_s <= longest_insert_s:
            raise ValueError(
                f"billing_settle_s ({self.billing_settle_s}) must exceed the statement/busy "
                f"timeout ({longest_insert_s} s)"
            )
        longest_estimate_s = self.db_pool_timeout_s + self.db_connect_timeout_s + longest_insert_s
        if self.idempotency_lease_s <= longest_estimate_s:
            raise ValueError(
                f"idempotency_lease_s ({self.idempotency_lease_s}) must exceed pool + connect + "
                f"statement timeouts ({longest_estimate_s} s)"
            )
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (validated once)."""
    return Settings()
