"""The container image carries every file the service reads at run time.

No Docker engine runs where the tests do, so the Dockerfile is checked as text: the runtime
stage must copy what `service` loads from beside itself (migrations, alembic.ini, the ONNX
model), no stage may copy the offline tools (`offline/`), and the compose file must wire the
service to PostgreSQL after the migrations.
"""

from __future__ import annotations

import re
from pathlib import Path

from service.pricing.regressor.runtime import DEFAULT_METADATA_PATH, DEFAULT_MODEL_PATH

REPO = Path(__file__).resolve().parents[2]


def runtime_stage_copies() -> set[str]:
    """Sources of the COPY instructions after the last FROM (the runtime stage)."""
    dockerfile = (REPO / "Dockerfile").read_text()
    runtime = dockerfile.rsplit("\nFROM ", 1)[1]
    copies = re.findall(r"^COPY (?!--from)(\S+) ", runtime, flags=re.M)
    return set(copies)


def copy_sources_of_every_stage() -> list[str]:
    """Every source of every COPY from the build context, in all stages (not COPY --from)."""
    sources: list[str] = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        words = line.split()
        if not words or words[0] != "COPY":
            continue
        arguments = words[1:]
        if any(word.startswith("--from") for word in arguments):
            continue
        paths = [word for word in arguments if not word.startswith("--")]
        sources.extend(paths[:-1])  # the last path is the destination
    return sources


def test_runtime_stage_copies_what_the_service_reads_beside_itself() -> None:
    copied = runtime_stage_copies()
    assert {"service", "migrations", "alembic.ini", "models"} <= copied
    # The regressor is looked up relative to the package, i.e. /app/models in the image.
    assert DEFAULT_MODEL_PATH.parent.name == "models" and DEFAULT_MODEL_PATH.is_file()
    assert DEFAULT_METADATA_PATH.is_file()


def test_no_stage_copies_the_offline_tools() -> None:
    sources = copy_sources_of_every_stage()
    assert "service" in sources and "models" in sources  # the parser sees the real COPY lines
    for source in sources:
        path = Path(source.rstrip("/")).parts
        # neither offline/ itself nor the whole context (".", "*"), which would carry it along
        assert path and path[0] not in {"offline", ".", "*"}, source
    dockerignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "offline" in {line.strip().rstrip("/") for line in dockerignore}


def test_runtime_stage_runs_as_non_root_with_a_healthcheck() -> None:
    runtime = (REPO / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    user = re.search(r"^USER (\d+):(\d+)$", runtime, flags=re.M)
    # Numeric uid and gid (Kubernetes' runAsNonRoot cannot check a name), and not root's.
    assert user is not None and user.group(1) != "0" and user.group(2) != "0"
    assert re.search(rf"useradd .*--uid {user.group(1)}\b", runtime)
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


def test_the_build_installs_the_locked_dependencies_with_their_hashes() -> None:
    build = (REPO / "Dockerfile").read_text().rsplit("\nFROM ", 1)[0]
    assert "COPY requirements.lock" in build
    assert re.search(r"pip install --require-hashes .*-r requirements.lock", build)
    assert re.search(r"pip install --no-deps \.$", build, flags=re.M)
