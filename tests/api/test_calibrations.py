"""Recalibration through HTTP: admin only, shrinkage worked by hand, outliers and bad
observations not fitted, tenants isolated unless the operator fits a global calibration, rollback,
and the calibration id recorded in quotes and shown in health."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from api_support import bearer, create_key, example_body, running_client
from fastapi.testclient import TestClient

K = 10.0  # the default shrinkage pseudo-count


@pytest.fixture(scope="module")
def client(database_url: str) -> Iterator[TestClient]:
    create_key(database_url, "setup", "estimate")  # keys required from the start
    with running_client(database_url) as test_client:
        yield test_client


def tenant_keys(database_url: str, tenant: str) -> tuple[str, str]:
    """(a gateway/operator key, an admin key) of a new tenant."""
    return (
        create_key(database_url, tenant, "estimate,billing,observe"),
        create_key(database_url, tenant, "admin"),
    )


def quote(client: TestClient, key: str, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/estimate", json=example_body(**overrides), headers=bearer(key))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def base_gpu_j(quoted: dict[str, Any]) -> float:
    """The model's own prediction behind a (possibly calibrated) quote [J]."""
    energy = quoted["energy"]
    return float(energy["gpu_j"]) / float(energy["calibration_factor"])


def observe(client: TestClient, key: str, quoted: dict[str, Any], ratio: float) -> str:
    body = {
        "gpu_j": base_gpu_j(quoted) * ratio,
        "measured_with": "nvml",
        "measured_at": "2026-11-22T10:00:00Z",
    }
    response = client.post(
        f"/v1/quotes/{quoted['quote_id']}/observations", json=body, headers=bearer(key)
    )
    assert response.status_code == 201, response.text
    observation_id: str = response.json()["observation_id"]
    return observation_id


def calibrate(client: TestClient, admin: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/calibrations", json=body, headers=bearer(admin))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def segment(calibration: dict[str, Any], gpu: str, family: str) -> dict[str, Any]:
    found = [s for s in calibration["segments"] if (s["gpu"], s["family"]) == (gpu, family)]
    assert len(found) == 1, calibration["segments"]
    return found[0]


def test_recalibration_is_admin_only(client: TestClient, database_url: str) -> None:
    operator, admin = tenant_keys(database_url, "scopes")
    assert client.post("/v1/calibrations", json={}).status_code == 401
    for method, path in [
        ("post", "/v1/calibrations"),
        ("get", "/v1/calibrations"),
        ("get", "/v1/calibrations/current"),
        ("post", "/v1/calibrations/rollback"),
        ("post", "/v1/calibrations/c_x/activate"),
    ]:
        response = client.request(method, path, headers=bearer(operator))
        assert response.status_code == 403, (path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    nothing = client.post("/v1/calibrations", json={}, headers=bearer(admin))
    assert nothing.status_code == 422 and "no observation to fit" in nothing.json()["detail"]
    assert client.get("/v1/calibrations/current", headers=bearer(admin)).status_code == 404
    assert client.post("/v1/calibrations/rollback", headers=bearer(admin)).status_code == 409


@pytest.mark.parametrize(("n_posted", "n_fitted"), [(4, 3), (375, 300)])
def test_shrinkage_by_hand(
    client: TestClient, database_url: str, n_posted: int, n_fitted: int
) -> None:
    """Every observation twice the quote: the newest 20 % are held out; the global correction
    keeps w = n/(n+k) of ln 2 and the segment w of what remains, so the factor is
    2^(1 - (k/(n+k))^2): 3 points give 2^(69/169) = 1.327, 300 give 2^(960/961) = 1.999."""
    operator, admin = tenant_keys(database_url, f"shrink{n_fitted}")
    quoted = quote(client, operator)
    for _ in range(n_posted):
        observe(client, operator, quoted, 2.0)
    created = calibrate(client, admin)
    w = n_fitted / (n_fitted + K)
    assert created["observations"] == {
        "total": n_posted,
        "other_model_version": 0,
        "out_of_range": 0,
        "outliers": 0,
        "fitted": n_fitted,
        "held_out": n_posted - n_fitted,
    }
    assert created["global_correction"]["log_factor"] == pytest.approx(w * math.log(2))
    llama = segment(created, "H100-SXM5-80GB", "llama")
    assert llama["n"] == n_fitted and llama["weight"] == pytest.approx(w)
    factor = 2 ** (1 - (1 - w) ** 2)
    assert llama["factor"] == pytest.approx(factor)
    assert factor == pytest.approx(2 ** (69 / 169) if n_fitted == 3 else 2 ** (960 / 961))
    assert created["holdout_mape_before"] == pytest.approx(0.5)
    assert created["holdout_mape_after"] == pytest.approx(1 - factor / 2)
    assert created["is_current"] and created["scope"] == "tenant"

    # New quotes are multiplied, bounds and phases included, and say by which calibration.
    after = quote(client, operator)
    assert after["calibration_id"] == created["calibration_id"]
    assert after["energy"]["calibration_factor"] == pytest.approx(factor)
    for field in ("gpu_j", "gpu_j_low", "gpu_j_high", "prefill_gpu_j", "decode_gpu_j"):
        assert after["energy"][field] == pytest.approx(quoted["energy"][field] * factor)
    assert after["carbon"]["operational_g"] > quoted["carbon"]["operational_g"]
    stored = client.get(f"/v1/quotes/{after['quote_id']}", headers=bearer(operator)).json()
    assert stored["calibration_id"] == created["calibration_id"]
    listed = client.get("/v1/quotes", headers=bearer(operator)).json()["items"]
    assert [q["calibration_id"] for q in listed] == [None, created["calibration_id"]]
    # Another GPU of the same tenant falls back to the global correction.
    a100 = quote(client, operator, hardware={"gpu": "A100-SXM4-80GB", "count": 2})
    assert a100["energy"]["calibration_factor"] == pytest.approx(2**w)


def test_outliers_and_implausible_observations_are_flagged_not_fitted(
    client: TestClient, database_url: str
) -> None:
    operator, admin = tenant_keys(database_url, "noisy")
    quoted = quote(client, operator)
    outlier = observe(client, operator, quoted, 12.0)  # in range, far from the others
    refused = observe(client, operator, quoted, 50.0)  # beyond 20x the quote
    ratios = [1.5 * (1 + 0.02 * ((i % 5) - 2)) for i in range(20)]
    for ratio in ratios:
        observe(client, operator, quoted, ratio)
    created = calibrate(client, admin)
    counts = created["observations"]
    assert counts["out_of_range"] == 1 and counts["outliers"] == 1
    assert counts["fitted"] + counts["held_out"] == 20 and counts["held_out"] == 4
    assert {(f["observation_id"], f["reason"]) for f in created["flagged"]} == {
        (outlier, "outlier"),
        (refused, "out_of_range"),
    }
    fitted = [math.log(r) for r in ratios[:16]]
    llama = segment(created, "H100-SXM5-80GB", "llama")
    assert llama["n"] == 16
    assert llama["mean_log_ratio"] == pytest.approx(sum(fitted) / 16)
    assert 1.3 < llama["factor"] < 1.5
    assert created["holdout_mape_after"] < created["holdout_mape_before"]


def test_tenants_are_isolated_unless_the_calibration_is_global(
    client: TestClient, database_url: str
) -> None:
    a_operator, a_admin = tenant_keys(database_url, "iso-a")
    b_operator, b_admin = tenant_keys(database_url, "iso-b")
    quoted_b = quote(client, b_operator)
    quoted_a = quote(client, a_operator)
    for _ in range(30):
        observe(client, a_operator, quoted_a, 3.0)
    own = calibrate(client, a_admin)
    assert quote(client, a_operator)["calibration_id"] == own["calibration_id"]
    untouched = quote(client, b_operator)
    assert untouched["calibration_id"] is None
    assert untouched["energy"]["gpu_j"] == pytest.approx(quoted_b["energy"]["gpu_j"])
    assert client.get("/v1/calibrations/current", headers=bearer(b_admin)).status_code == 404
    # B's admin cannot see, activate or fit on A's calibration and observations.
    path = f"/v1/calibrations/{own['calibration_id']}"
    assert client.get(path, headers=bearer(b_admin)).status_code == 404
    assert client.post(f"{path}/activate", headers=bearer(b_admin)).status_code == 404
    assert client.post("/v1/calibrations", json={}, headers=bearer(b_admin)).status_code == 422

    # The operator fits a global one: fitted on every tenant's observations, it prices B's
    # quotes (B has none of its own), while A keeps its own.
    operator_key = create_key(database_url, "operations", "operator")
    shared = calibrate(client, operator_key, scope="global")
    assert shared["scope"] == "global" and shared["tenant"] is None
    assert shared["observations"]["total"] > own["observations"]["total"]
    priced_b = quote(client, b_operator)
    assert priced_b["calibration_id"] == shared["calibration_id"]
    assert priced_b["energy"]["calibration_factor"] > 1
    current_b = client.get("/v1/calibrations/current", headers=bearer(b_admin)).json()
    assert current_b["calibration_id"] == shared["calibration_id"]
    assert quote(client, a_operator)["calibration_id"] == own["calibration_id"]
    # Rolled back, B is uncalibrated again.
    rolled = client.post(
        "/v1/calibrations/rollback", json={"scope": "global"}, headers=bearer(operator_key)
    )
    assert rolled.status_code == 200 and rolled.json() == {
        "rolled_back": shared["calibration_id"],
        "current": None,
    }
    assert quote(client, b_operator)["calibration_id"] is None


def test_versions_rollback_and_health(client: TestClient, database_url: str) -> None:
    operator, admin = tenant_keys(database_url, "versions")
    quoted = quote(client, operator)
    for _ in range(10):
        observe(client, operator, quoted, 2.0)
    first = calibrate(client, admin)
    for _ in range(10):
        observe(client, operator, quoted, 3.0)
    second = calibrate(client, admin)
    assert second["previous_id"] == first["calibration_id"]
    assert second["segments"][0]["factor"] > first["segments"][0]["factor"]
    listed = client.get("/v1/calibrations", headers=bearer(admin)).json()["items"]
    listed = [c for c in listed if c["scope"] == "tenant"]  # global ones are listed too
    assert [c["calibration_id"] for c in listed] == [
        second["calibration_id"],
        first["calibration_id"],
    ]
    assert [c["is_current"] for c in listed] == [True, False]
    health = client.get("/v1/health", headers=bearer(operator)).json()
    assert health["calibration_id"] == second["calibration_id"]
    assert client.get("/v1/health").json()["calibration_id"] is None  # no global one

    # Fitting without activating leaves the current one in place.
    spare = calibrate(client, admin, activate=False)
    assert not spare["is_current"]
    assert quote(client, operator)["calibration_id"] == second["calibration_id"]

    rolled = client.post("/v1/calibrations/rollback", headers=bearer(admin)).json()
    assert rolled["rolled_back"] == second["calibration_id"]
    assert rolled["current"]["calibration_id"] == first["calibration_id"]
    assert quote(client, operator)["calibration_id"] == first["calibration_id"]
    current = client.get("/v1/calibrations/current", headers=bearer(admin)).json()
    assert current["calibration_id"] == first["calibration_id"]

    rolled = client.post("/v1/calibrations/rollback", headers=bearer(admin)).json()
    assert rolled == {"rolled_back": first["calibration_id"], "current": None}
    assert quote(client, operator)["calibration_id"] is None
    assert client.get("/v1/health", headers=bearer(operator)).json()["calibration_id"] is None

    activated = client.post(
        f"/v1/calibrations/{second['calibration_id']}/activate", headers=bearer(admin)
    )
    assert activated.status_code == 200 and activated.json()["is_current"]
    assert quote(client, operator)["calibration_id"] == second["calibration_id"]
    fetched = client.get(f"/v1/calibrations/{first['calibration_id']}", headers=bearer(admin))
    assert fetched.status_code == 200 and not fetched.json()["is_current"]


def test_only_an_operator_key_changes_the_global_calibration(
    client: TestClient, database_url: str
) -> None:
    """A tenant's admin key neither fits a global calibration from other tenants'
    observations, nor rolls back or activates one: each is a 403 that changes nothing."""
    gateway, admin = tenant_keys(database_url, "glob-a")
    other_gateway, _ = tenant_keys(database_url, "glob-b")
    operator_key = create_key(database_url, "operations", "operator")
    for key, ratio in ((gateway, 2.0), (other_gateway, 4.0)):
        quoted = quote(client, key)
        for _ in range(5):
            observe(client, key, quoted, ratio)

    refused = client.post("/v1/calibrations", json={"scope": "global"}, headers=bearer(admin))
    assert refused.status_code == 403, refused.text
    assert "operator" in refused.json()["detail"] and "segments" not in refused.json()
    listed = client.get("/v1/calibrations", headers=bearer(admin)).json()["items"]
    assert [c for c in listed if c["scope"] == "global" and c["is_current"]] == []

    shared = calibrate(client, operator_key, scope="global")
    assert shared["observations"]["total"] >= 10  # both tenants' observations
    path = f"/v1/calibrations/{shared['calibration_id']}"
    for method, url, body in [
        ("POST", "/v1/calibrations/rollback", {"scope": "global"}),
        ("POST", f"{path}/activate", None),
    ]:
        answer = client.request(method, url, json=body, headers=bearer(admin))
        assert answer.status_code == 403, (url, answer.text)
    assert quote(client, other_gateway)["calibration_id"] == shared["calibration_id"]
    rolled = client.post(
        "/v1/calibrations/rollback", json={"scope": "global"}, headers=bearer(operator_key)
    )
    assert rolled.status_code == 200 and rolled.json()["rolled_back"] == shared["calibration_id"]
    assert quote(client, other_gateway)["calibration_id"] is None
