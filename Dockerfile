# syntax=docker/dockerfile:1
# Build stage: install the package and its dependencies into a virtual environment.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
COPY pyproject.toml README.md ./
COPY service ./service
RUN /opt/venv/bin/pip install .

# Runtime stage: the venv, the migrations, and a non-root user.
FROM python:3.11-slim-bookworm AS runtime
ENV PATH=/opt/venv/bin:$PATH PYTHONPATH=/app PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN useradd --create-home --uid 10001 quotes
WORKDIR /app
COPY --from=build /opt/venv /opt/venv
COPY alembic.ini ./
COPY migrations ./migrations
COPY service ./service
RUN mkdir -p /app/var && chown quotes:quotes /app/var
USER quotes
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/v1/health', timeout=2).status == 200 else 1)"
CMD ["uvicorn", "service.main:app", "--host", "0.0.0.0", "--port", "8000"]
