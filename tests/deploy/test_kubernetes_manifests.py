"""deploy/kubernetes holds manifests that fit the image and the app: the probes hit routes the
app serves, the pods run as the image's non-root user, the workers share their metrics, and
migrations run in a Job, never in the serving pods."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from service.api.access import app_routes
from service.main import create_app

REPO = Path(__file__).resolve().parents[2]
KUBERNETES = REPO / "deploy" / "kubernetes"


def manifests() -> dict[str, dict[str, Any]]:
    """kind -> the manifest, for every file the kustomization lists."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    found = {}
    for name in kustomization["resources"]:
        document = yaml.safe_load((KUBERNETES / name).read_text())
        found[document["kind"]] = document
    return found


def image_user() -> tuple[int, int]:
    runtime = (REPO / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    user = re.search(r"^USER (\d+):(\d+)$", runtime, flags=re.M)
    assert user is not None
    return int(user.group(1)), int(user.group(2))


def test_probes_hit_routes_the_app_serves() -> None:
    paths = {route.path for route in app_routes(create_app())}
    container = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in paths, probe
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/health/ready"


def test_pods_and_the_job_run_as_the_images_non_root_user() -> None:
    uid, gid = image_user()
    found = manifests()
    for kind in ("Deployment", "Job"):
        pod = found[kind]["spec"]["template"]["spec"]
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid), kind
        for container in pod["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_workers_share_metrics_and_the_pods_do_not_migrate() -> None:
    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["QUOTES_RUN_MIGRATIONS_ON_START"] == "false"
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    metrics_volume = volumes[mounts[env["PROMETHEUS_MULTIPROC_DIR"]]]
    assert metrics_volume["emptyDir"]["medium"] == "Memory"  # empty at every start
    assert env["QUOTES_SPOOL_DIR"] in mounts
    job = found["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert job["command"] == ["alembic", "upgrade", "head"]
    assert job["image"] == container["image"]
