"""The physical refit: the model's own numbers at the prior, coefficients recovered from
observations the model generated, shrinkage worked by hand, activation and scope."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from service.core.estimate import estimate_workloads
from service.pricing.calibration import (
    PARAMETERS,
    Corrections,
    FitSettings,
    GpuFit,
    HeldOutError,
    PhysicalPoint,
    PhysicalTerms,
    fit_calibration,
    map_theta,
    physical_terms,
)
from service.pricing.calibration.fit import activation, folds
from service.pricing.calibration.map_fit import predicted
from service.pricing.calibration.physical_terms import stack
from service.pricing.calibration.physics import factors_many, modelled
from service.pricing.estimator import Estimator
from service.schemas.estimate_request import EstimateRequest

T0 = datetime(2026, 11, 22, tzinfo=UTC)
ZERO = np.zeros(len(PARAMETERS))
H100 = "H100-SXM5-80GB"


@pytest.fixture(scope="module")
def estimator() -> Estimator:
    return Estimator.from_catalogues()


def request_terms(
    estimator: Estimator, model: str, batch: int, prompt: int, output: int, count: int = 1
) -> tuple[PhysicalTerms, float, float]:
    """A request's terms and the estimate's own GPU energy [J] and total time [s]."""
    body = {
        "model": model,
        "workload": {"batch_size": batch, "prompt_tokens": prompt, "output_tokens": output},
        "hardware": {"gpu": H100, "count": count},
    }
    resolved = estimator.resolve(EstimateRequest.model_validate(body))
    coefficients = estimator.engine_coefficients[resolved.engine]
    estimates, _ = estimate_workloads(
        resolved.architecture, [resolved.workload], resolved.deployment, coefficients
    )
    terms = physical_terms(estimates).take([0])
    return terms, float(estimates.gpu_j[0]), float(estimates.phase_s[:, 0].sum())


def test_at_the_prior_the_terms_give_back_the_estimate(estimator: Estimator) -> None:
    """theta = 0 reproduces the estimate's energy and both phases' times, tensor-parallel
    (network limbs) included, and moves nothing."""
    for model, count in (("meta-llama/Llama-3.1-8B-Instruct", 1), ("Qwen/Qwen2.5-72B", 4)):
        terms, gpu_j, total_s = request_terms(estimator, model, 8, 512, 256, count)
        at_prior = modelled(terms, ZERO)
        assert at_prior.gpu_j[0] == pytest.approx(gpu_j, rel=1e-12)
        assert at_prior.total_s[0] == pytest.approx(total_s, rel=1e-12)
        (unmoved,) = factors_many(terms, ZERO)
        assert (unmoved.energy, unmoved.prefill, unmoved.decode) == (1.0, 1.0, 1.0)


def synthetic_terms(overhead_s: float, idle_w: float) -> PhysicalTerms:
    """A request of host time alone, drawn at idle power: E = idle x overhead_s (one GPU)."""
    empty = np.zeros((1, 2, 1))
    return PhysicalTerms(
        compute_s=empty,
        memory_s=empty,
        network_s=empty,
        rest_s=empty,
        overhead_s=np.array([[0.0, overhead_s]]),
        kernel_share=np.ones((1, 2)),
        host_idle_j=np.array([[0.0, idle_w * overhead_s]]),
        host_dynamic_j=np.zeros((1, 2)),
        idle_w=np.array([idle_w]),
        tdp_w=np.array([700.0]),
        compute_w=np.zeros(1),
        memory_w=np.zeros(1),
        network_w=np.zeros(1),
    )


def point(
    i: int,
    terms: PhysicalTerms,
    observed_j: float,
    observed_s: float | None,
    gpu: str = H100,
    engine: str = "vllm-v1",
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
) -> PhysicalPoint:
    quoted_j = float(modelled(terms, ZERO).gpu_j[0])
    return PhysicalPoint(
        f"o{i:04d}",
        gpu,
        engine,
        model,
        "llama",
        terms,
        quoted_j,
        observed_j,
        observed_s,
        T0 + timedelta(seconds=i),
    )


def test_one_observation_is_shrunk_toward_the_prior_by_hand() -> None:
    """Host time only: ln T = x (host_time), ln E = x + y (idle_power). One observation at
    twice both (a = ln 2), noise sigma 0.2, prior sigmas 0.3 (x) and 0.2 (y) minimise
    (a-x)^2/0.04 + (a-x-y)^2/0.04 + x^2/0.09 + y^2/0.04; the normal equations
    [[550/9, 25], [25, 50]] (x, y) = (50 a, 25 a) give x = 27/35 a, y = 4/35 a: the quote's
    time moves x2^(27/35) = 1.707, its energy x2^(31/35) = 1.848, not x2. The coefficients no
    observation informs stay at their prior."""
    terms = synthetic_terms(overhead_s=1.0, idle_w=100.0)
    theta = map_theta([point(0, terms, 200.0, 2.0)], noise_sigma=0.2)
    a = math.log(2)
    named = dict(zip(PARAMETERS, theta.tolist(), strict=True))
    assert named["host_time"] == pytest.approx(27 / 35 * a, abs=1e-6)
    assert named["idle_power"] == pytest.approx(4 / 35 * a, abs=1e-6)
    others = [v for k, v in named.items() if k not in ("host_time", "idle_power")]
    assert max(abs(v) for v in others) < 1e-9
    (moved,) = factors_many(terms, theta)
    assert moved.decode == pytest.approx(2 ** (27 / 35), rel=1e-6)
    assert moved.energy == pytest.approx(2 ** (31 / 35), rel=1e-6)
    # A hundred such observations move it nearly all the way (x + y -> a, x -> a).
    many = map_theta([point(i, terms, 200.0, 2.0) for i in range(100)], noise_sigma=0.2)
    assert factors_many(terms, many)[0].decode == pytest.approx(2.0, rel=0.01)
    assert factors_many(terms, many)[0].energy == pytest.approx(2.0, rel=0.01)


def test_coefficients_the_model_generated_are_recovered(estimator: Estimator) -> None:
    """Observations made by the model itself under known multipliers (compute x1.16, memory
    x0.90, host time x1.35, idle power x0.82, memory power x1.22) over batches, lengths and
    two models: the refit, with the data dominating the prior, finds the time multipliers and
    predicts the energy and time of requests it never saw within 0.5 %. (Idle and memory power
    are not found apart: over a memory-bound kernel idle x time and power x memory time grow
    together, so only their combination is identified and the prior splits it.)"""
    true = dict.fromkeys(PARAMETERS, 0.0)
    true |= {
        "compute_time": 0.15,
        "memory_time": -0.1,
        "host_time": 0.3,
        "idle_power": -0.2,
        "memory_power": 0.2,
    }
    theta_true = np.array([true[name] for name in PARAMETERS])
    seen, unseen = [], []
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"):
        for batch in (1, 4, 16, 64):
            for prompt, output in ((128, 512), (2048, 128)):
                seen.append(request_terms(estimator, model, batch, prompt, output)[0])
            unseen.append(request_terms(estimator, model, batch * 2, 700, 300)[0])
    generated = modelled(stack(seen), theta_true)
    points = [
        point(i, t, float(generated.gpu_j[i]), float(generated.total_s[i]))
        for i, t in enumerate(seen)
    ]
    theta = map_theta(points, noise_sigma=1e-3)
    for name in ("compute_time", "memory_time", "host_time"):
        assert theta[PARAMETERS.index(name)] == pytest.approx(true[name], abs=0.02), name
    fresh = [point(i, t, 1.0, 1.0) for i, t in enumerate(unseen)]
    ours, truth = predicted(fresh, theta), predicted(fresh, theta_true)
    np.testing.assert_allclose(ours.energy_after, truth.energy_after, rtol=5e-3)
    np.testing.assert_allclose(ours.total_s_after, truth.total_s_after, rtol=5e-3)


def test_activation_needs_enough_observations_and_a_held_out_gain() -> None:
    terms = synthetic_terms(overhead_s=1.0, idle_w=100.0)
    few = fit_calibration([point(i, terms, 150.0, 1.5) for i in range(5)])
    (fit,) = few.corrections.fits.values()
    assert not fit.active and fit.reason == "5 observations, fewer than the 8 required"
    enough = fit_calibration([point(i, terms, 150.0, 1.5) for i in range(10)])
    (fit,) = enough.corrections.fits.values()
    assert fit.active and fit.reason == "held-out error falls"
    held = fit.held_out
    assert held.energy_before == pytest.approx(1 / 3) and held.latency_before == pytest.approx(
        1 / 3
    )
    assert held.energy_after is not None and held.energy_after < 0.1
    assert enough.held_out == 10 and enough.holdout_mape_after == held.energy_after
    # Observations that agree with the model leave nothing to gain: stored, not active.
    exact = fit_calibration([point(i, terms, 100.0, 1.0) for i in range(10)])
    (fit,) = exact.corrections.fits.values()
    assert not fit.active and fit.reason == "held-out error does not fall"
    unscored = fit_calibration(
        [point(i, terms, 150.0, 1.5) for i in range(10)], FitSettings(holdout_fraction=0.0)
    )
    assert not next(iter(unscored.corrections.fits.values())).active


def test_a_fit_moves_its_own_gpu_and_engine_only() -> None:
    terms = stack([synthetic_terms(overhead_s=1.0, idle_w=100.0)])
    theta = tuple(0.2 if name == "host_time" else 0.0 for name in PARAMETERS)
    active = GpuFit(H100, "vllm-v1", 10, 10, theta, HeldOutError(), True, "")
    pooled = Corrections.none(10.0).global_correction
    corrections = Corrections(10.0, pooled, {}, {(H100, "vllm-v1"): active})
    moved = corrections.physical_factors(H100, "vllm-v1", lambda: terms)
    assert moved is not None and moved[0].decode == pytest.approx(math.exp(0.2))
    assert moved[0].prefill == 1.0  # a phase of no time is not moved
    assert corrections.physical_factors("A100-SXM4-80GB", "vllm-v1", lambda: terms) is None
    assert corrections.physical_factors(H100, "sglang", lambda: terms) is None
    inactive = Corrections(
        10.0,
        pooled,
        {},
        {(H100, "vllm-v1"): GpuFit(H100, "vllm-v1", 3, 3, theta, HeldOutError(), False, "")},
    )
    assert inactive.physical_factors(H100, "vllm-v1", lambda: terms) is None
    assert Corrections.from_payload(corrections.to_payload()) == corrections


def test_a_groups_terms_are_its_requests_terms(estimator: Estimator) -> None:
    """The terms of a pass of three workloads give each workload's own estimate, alone or
    stacked with a request of another kernel count (padded with zeros, which add nothing)."""
    body = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "workload": {"batch_size": 1, "prompt_tokens": 100, "output_tokens": 100},
        "hardware": {"gpu": H100, "count": 2},
    }
    resolved = estimator.resolve(EstimateRequest.model_validate(body))
    coefficients = estimator.engine_coefficients[resolved.engine]
    workloads = [replace(resolved.workload, batch_size=b, prompt_tokens=50 * b) for b in (1, 8, 32)]
    estimates, _ = estimate_workloads(
        resolved.architecture, workloads, resolved.deployment, coefficients
    )
    together = physical_terms(estimates)
    np.testing.assert_allclose(modelled(together, ZERO).gpu_j, estimates.gpu_j, rtol=1e-12)
    host_only = synthetic_terms(overhead_s=1.0, idle_w=100.0)  # 1 kernel: 100 J, 1 s
    mixed = stack([together.take([2]), host_only, together.take([0])])
    assert mixed.compute_s.shape == (3, 2, together.compute_s.shape[2])
    at_prior = modelled(mixed, ZERO)
    np.testing.assert_allclose(
        at_prior.gpu_j, [estimates.gpu_j[2], 100.0, estimates.gpu_j[0]], rtol=1e-12
    )
    assert at_prior.total_s[1] == pytest.approx(1.0)
    assert len(stack([])) == 0


def test_activation_says_which_error_would_rise() -> None:
    settings = FitSettings()
    assert activation(10, HeldOutError(0.2, 0.1, 0.1, 0.15), settings) == (
        False,
        "held-out total time error would rise",
    )
    assert activation(10, HeldOutError(0.2, 0.25, 0.1, 0.15), settings) == (
        False,
        "held-out energy and total time error would rise",
    )
    assert activation(10, HeldOutError(0.2, 0.1, None, None), settings) == (
        True,
        "held-out error falls",
    )
    assert activation(7, HeldOutError(0.2, 0.1, None, None), settings)[0] is False


def test_folds_keep_each_models_observations_together() -> None:
    """Models numbered by first arrival (A 0, B 1, C 2) and dealt into k = 2 folds: A and C in
    fold 0, B in fold 1; with one model only, rows are dealt in turn."""
    terms = synthetic_terms(overhead_s=1.0, idle_w=100.0)
    models = ["A", "A", "B", "C", "B"]
    points = [point(i, terms, 100.0, 1.0, model=m) for i, m in enumerate(models)]
    assert folds(points, 0.5) == [0, 0, 1, 0, 1]
    assert folds(points, 0.2) == [0, 0, 1, 2, 1]  # k = 5, at most one fold per model
    alone = [point(i, terms, 100.0, 1.0) for i in range(5)]
    assert folds(alone, 0.5) == [0, 1, 0, 1, 0]
    assert folds(alone, 0.0) == [-1] * 5
