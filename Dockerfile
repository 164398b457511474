# syntax=docker/dockerfile:1
# Build stage: install the dependencies at the versions and hashes of requirements.lock, then the
# package itself without resolving anything again, into a virtual environment.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY requirements.lock ./
RUN /opt/venv/bin/pip install --require-hashes --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md ./
COPY service ./service
RUN /opt/venv/bin/pip install --no-deps .

# Runtime stage: the venv, the migrations, the regressor model, and a non-root user. The service is run from /app
# (PYTHONPATH) so that `service.db.migrate` finds alembic.ini and migrations/ beside it. Only the runtime
# package `service` is copied, here and in the build stage: the offline tools (`offline/`) stay out of the image.
FROM python:3.11-slim-bookworm AS runtime
# MALLOC_ARENA_MAX=2: glibc gives each thread (event loop, pricing, database sink, thread pool) its own
# malloc arena, and freed memory scattered over many arenas is kept: RSS rose in steps in the soak.
ENV PATH=/opt/venv/bin:$PATH PYTHONPATH=/app PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MALLOC_ARENA_MAX=2
RUN groupadd --gid 10001 quotes && useradd --create-home --uid 10001 --gid 10001 quotes
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY alembic.ini ./
COPY migrations ./migrations
COPY service ./service
# The learned energy regressor: service/pricing/regressor/runtime.py looks for it in /app/models.
COPY models ./models
# var/ holds the default SQLite file and, when QUOTES_SPOOL_DIR points there, the quote spool;
# created here so that a volume mounted on it starts out owned by the non-root user.
RUN mkdir -p /app/var/spool && chown -R quotes:quotes /app/var
# Numeric, so that Kubernetes' runAsNonRoot can verify the user is not root.
USER 10001:10001
EXPOSE 8000
# Liveness: /v1/health/live answers 200 while the process serves, the database away or not:
# estimates keep working then, and restarting the container would not bring it back.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/v1/health/live', timeout=2).status != 200)"]
# Workers: WEB_CONCURRENCY (read by uvicorn), one per CPU core given to the container.
CMD ["uvicorn", "service.main:app", "--host", "0.0.0.0", "--port", "8000", "--timeout-graceful-shutdown", "20"]
