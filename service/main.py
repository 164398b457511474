"""The FastAPI application: `create_app()` and the module-level `app` uvicorn serves."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy.exc import OperationalError

from service.api.admission import AdmissionMiddleware
from service.api.client_caps import ClientCapsMiddleware
from service.api.deps import AppServices
from service.api.keys import KeyStore
from service.api.load_shedding import LoadSheddingMiddleware
from service.api.middleware import BodyReadMiddleware, LargeAnswerGZipMiddleware
from service.api.openapi import QuotesAPI, operation_id
from service.api.problems import install_problem_handlers
from service.api.rate_limit import install_rate_limits, share_rate_limits
from service.api.request_record import RequestRecordMiddleware
from service.api.routes import (
    calibrations,
    catalog,
    docs,
    estimate,
    gpus,
    health,
    models,
    probes,
    quotes,
)
from service.api.tracing import install_tracing
from service.config import Settings, get_settings
from service.db import migrate
from service.db.engine import Database
from service.db.quote_store import QuoteStore
from service.db.spool import QuoteSpool, SpoolReplayer
from service.db.wal_checkpoints import wal_checkpointer_for
from service.logs import configure_logging
from service.metrics import Metrics, multiprocess_dir
from service.pricing.estimator import Estimator
from service.pricing.regressor.runtime import (
    DEFAULT_METADATA_PATH,
    DEFAULT_MODEL_PATH,
    EnergyRegressor,
)
from service.quotes.calibration_registry import CalibrationRegistry
from service.quotes.idempotency import InFlightGuard
from service.quotes.postgres_sink import PostgresQuoteSink
from service.quotes.pricing_thread import PricingThread
from service.quotes.quote_sink import QuoteSink
from service.quotes.service import QuoteService
from service.quotes.sqlite_sink import SqliteQuoteSink

logger = logging.getLogger("service")

DESCRIPTION = """
Quotes the GPU energy, latency and CO2e of an LLM inference request before it runs.

`energy.gpu_j_low`/`gpu_j_high` bound `gpu_j` by the `interval_lower_quantile` and
`interval_upper_quantile` (by default the 10th and 90th percentiles) of measured/predicted
energy on model families held out of the cost model's fit. Errors are RFC 9457 problem details.
"""


def load_regressor(settings: Settings) -> EnergyRegressor | None:
    """The learned energy regressor, or None (analytical quotes) when it is turned off or not
    shipped. A shipped model that does not match this code's features stops the start-up."""
    if not settings.use_regressor:
        logger.info("learned regressor turned off: quoting with the analytical model")
        return None
    model = settings.onnx_model_path or DEFAULT_MODEL_PATH
    metadata = settings.onnx_metadata_path or DEFAULT_METADATA_PATH
    if not (model.is_file() and metadata.is_file()):
        logger.warning("no learned regressor at %s: quoting with the analytical model", model)
        return None
    regressor = EnergyRegressor.load(
        model,
        metadata,
        intra_op_threads=settings.onnx_intra_op_threads,
        inter_op_threads=settings.onnx_inter_op_threads,
    )
    logger.info("learned regressor %s loaded from %s", regressor.version, model)
    return regressor


def build_services(settings: Settings, metrics: Metrics) -> AppServices:
    """Everything a request needs, built once: catalogues, coefficients, engine, key store."""
    database = Database(settings)
    estimator = Estimator.from_catalogues(
        regressor=load_regressor(settings),
        coefficients_path=settings.cost_model_coefficients_path,
    )
    keys = KeyStore(
        database,
        require_key=settings.require_api_key,
        mode_ttl_s=settings.api_key_mode_ttl_s,
        key_ttl_s=settings.api_key_cache_s,
    )
    spool = QuoteSpool(settings.spool_dir) if settings.spool_dir is not None else None
    store = QuoteStore(database, spool, claim_lease_s=settings.idempotency_lease_s)
    registry = CalibrationRegistry(database, refresh_s=settings.calibration_refresh_s)
    sink: QuoteSink
    if database.backend == "sqlite":
        sink = SqliteQuoteSink(store, commit_in_loop=database.in_loop_engine is not None)
    else:
        sink = PostgresQuoteSink(store, commit_in_loop=settings.postgres_commit_in_loop)
    pricer = PricingThread(estimator)
    quotes = QuoteService(pricer, store, sink, InFlightGuard(), metrics, registry)
    return AppServices(settings, database, estimator, keys, quotes, metrics, registry)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    if settings.run_migrations_on_start:
        try:
            await anyio.to_thread.run_sync(migrate.upgrade, settings.database_url)
        except OperationalError as error:
            logger.error("migrations not run, database unavailable: %s", error)
    services = build_services(settings, app.state.metrics)
    app.state.services = services
    shared_windows = share_rate_limits(app, settings, services.metrics)
    if services.keys.open_mode():
        logger.warning("no API key configured: open single-tenant dev mode (tenant 'dev')")
    else:
        logger.info("API keys required")
    logger.info(
        "estimator %s, database %s", services.estimator.model_version, services.database.backend
    )
    sink, pricer = services.quotes.sink, services.quotes.pricer
    pricer.start()
    sink.start()
    checkpointer = wal_checkpointer_for(settings)
    if checkpointer is not None:
        checkpointer.start()
    spool = services.quotes.store.spool
    replayer = None
    if spool is not None:
        replayer = SpoolReplayer(
            spool,
            services.database,
            services.quotes.store.commit_replayed,
            settings.spool_replay_interval_s,
        )
        replayer.start()
    # What start-up built (catalogues, schemas, the model, the app) lives as long as the
    # process: freezing it keeps the collector's full passes, which a 1000-item batch
    # triggers, to what requests allocate. Unfrozen at shutdown, so that an app that stops (in
    # tests, many do in one process) leaves nothing uncollectable behind.
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        # After uvicorn drained the requests: prices and stores what they queued.
        pricer.stop()
        await sink.finish_in_loop()
        sink.stop()
        if replayer is not None:
            replayer.stop()
        if checkpointer is not None:
            checkpointer.stop()
        services.database.dispose()
        if shared_windows is not None:
            shared_windows.dispose()


def create_app(settings: Settings | None = None) -> FastAPI:
    """A configured app; the lifespan loads catalogues and migrates the database."""
    settings = settings or get_settings()
    configure_logging(settings.log_level, settings.log_format)
    app = QuotesAPI(
        title="LLM energy quotes",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # operationIds are the route functions' names (`estimate`, `list_quotes`): what
        # generated clients name their methods after.
        generate_unique_id_function=operation_id,
        docs_url=None,  # served offline by service.api.routes.docs
        redoc_url=None,
        # FastAPI's own OpenTelemetry hooks ask the global providers on every request whether
        # they are configured; this service traces through `install_tracing` alone.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    shared_metrics = multiprocess_dir()
    if shared_metrics is not None and not os.path.isdir(shared_metrics):
        raise RuntimeError(
            f"PROMETHEUS_MULTIPROC_DIR={shared_metrics} is not a directory: create it (empty) "
            "before the workers start, or unset it for single-process metrics"
        )
    app.state.metrics = Metrics()
    install_problem_handlers(app)
    # Outermost last. A request meets, in turn: its record (id, metrics), the caller's key and
    # scope (from its headers), its client's and key's caps on requests in flight, its body read
    # whole within a deadline, and only then a shedding slot, so that neither a client without a key
    # nor one that stalls mid-body holds a slot, and no one client holds them all.
    if settings.shed_max_concurrent > 0:  # inside the metrics: shed requests are counted
        app.add_middleware(
            LoadSheddingMiddleware,
            max_concurrent=settings.shed_max_concurrent,
            max_queued=settings.shed_max_queued,
            max_queue_wait_s=settings.shed_max_queue_wait_s,
            retry_after_s=settings.shed_retry_after_s,
        )
    app.add_middleware(
        BodyReadMiddleware,
        max_bytes=settings.max_body_bytes,
        timeout_s=settings.body_read_timeout_s,
    )
    per_ip, per_key = settings.client_caps()
    if per_ip or per_key:
        app.add_middleware(
            ClientCapsMiddleware,
            max_per_ip=per_ip,
            max_per_key=per_key,
            retry_after_s=settings.shed_retry_after_s,
            trusted_proxies=settings.client_trusted_proxies,
        )
    app.add_middleware(AdmissionMiddleware)
    if settings.gzip_min_bytes > 0:  # level 1: most of the saving at a fraction of the CPU
        app.add_middleware(
            LargeAnswerGZipMiddleware, minimum_size=settings.gzip_min_bytes, compresslevel=1
        )
    install_rate_limits(app, settings)
    # Outermost: every log line of a request has its id, and its latency covers the rest.
    app.add_middleware(RequestRecordMiddleware, metrics=app.state.metrics)
    install_tracing(app, settings)
    # The estimates' routes are the app's own, not an included router's: FastAPI reaches an
    # included router's route through wrappers that re-check the router's routes on every
    # request, a cost each estimate would pay.
    app.router.routes.extend(estimate.router.routes)
    for module in (quotes, calibrations, catalog, gpus, models, health, probes, docs):
        app.include_router(module.router)
    return app


app = create_app()
