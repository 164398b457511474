"""The container image carries every file the service reads at run time.

No Docker engine runs where the tests do, so the Dockerfile is checked as text: the runtime
stage must copy what `service` loads from beside itself (migrations, alembic.ini, the ONNX
model) and the compose file must wire the service to PostgreSQL after the migrations.
"""

from __future__ import annotations

import re
from pathlib import Path

from service.regressor.runtime import DEFAULT_METADATA_PATH, DEFAULT_MODEL_PATH

REPO = Path(__file__).resolve().parents[2]


def runtime_stage_copies() -> set[str]:
    """Sources of the COPY instructions after the last FROM (the runtime stage)."""
    dockerfile = (REPO / "Dockerfile").read_text()
    runtime = dockerfile.rsplit("\nFROM ", 1)[1]
    copies = re.findall(r"^COPY (?!--from)(\S+) ", runtime, flags=re.M)
    return set(copies)


def test_runtime_stage_copies_what_the_service_reads_beside_itself() -> None:
    copied = runtime_stage_copies()
    assert {"service", "migrations", "alembic.ini", "models"} <= copied
    # The regressor is looked up relative to the package, i.e. /app/models in the image.
    assert DEFAULT_MODEL_PATH.parent.name == "models" and DEFAULT_MODEL_PATH.is_file()
    assert DEFAULT_METADATA_PATH.is_file()


def test_runtime_stage_runs_as_non_root_with_a_healthcheck() -> None:
    runtime = (REPO / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    user = re.search(r"^USER (\S+)", runtime, flags=re.M)
    assert user is not None and user.group(1) not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*/v1/health", runtime, flags=re.M)


def test_compose_starts_the_service_after_postgres_is_healthy_and_migrated() -> None:
    compose = (REPO / "docker-compose.yml").read_text()
    service = compose.split("\n  service:\n", 1)[1]
    assert "condition: service_healthy" in service
    assert "condition: service_completed_successfully" in service
    assert "postgresql+psycopg://" in service


def test_dockerignore_does_not_hide_what_the_runtime_stage_copies() -> None:
    ignored = {
        line.strip().rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not runtime_stage_copies() & ignored
