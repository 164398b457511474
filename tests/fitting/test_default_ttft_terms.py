"""The default profile's TTFT term set, chosen on leave-one-family-out folds
(offline/fitting/default_ttft.choose_ttft_terms), on runs whose measured TTFT was made by hand:
TTFT = base + 0.2 x wave + 0.05 s (both terms), or base + 0.3 x wave (the wave alone)."""

from __future__ import annotations

import numpy as np
import pytest

from offline.fitting.default_ttft import choose_ttft_terms, with_ttft_terms
from offline.fitting.engine_profiles import Slopes
from service.catalog.engines import DEFAULT_ENGINE, load_engine_coefficients

BASE = [0.05, 0.08, 0.12, 0.30, 0.40, 0.20]
WAVE = [0.10, 0.50, 1.00, 2.00, 4.00, 0.70]
FAMILIES = ["a", "a", "b", "b", "c", "c"]


def _slopes(measured: list[float]) -> Slopes:
    n = len(BASE)
    return Slopes(
        tpot_s=np.full(n, 0.01),
        ttft_s=np.array(BASE),
        tpot_slope=np.zeros((n, 4)),
        ttft_slope=np.zeros((n, 4)),
        measured_tpot_s=np.full(n, 0.01),
        measured_ttft_s=np.array(measured),
        family=FAMILIES,
        gpu=["g"] * n,
        launch_s=0.0,
        layout=["TP only"] * n,
        lines=list(range(n)),
        wave_s=np.array(WAVE),
        continuous=True,
    )


def test_both_terms_are_chosen_and_recovered() -> None:
    # 0.05 + 0.02 + 0.05 = 0.12; 0.08 + 0.10 + 0.05 = 0.23; 0.12 + 0.20 + 0.05 = 0.37;
    # 0.30 + 0.40 + 0.05 = 0.75; 0.40 + 0.80 + 0.05 = 1.25; 0.20 + 0.14 + 0.05 = 0.39.
    chosen, (share, overhead_s) = choose_ttft_terms(_slopes([0.12, 0.23, 0.37, 0.75, 1.25, 0.39]))
    assert chosen == "both"
    assert share == pytest.approx(0.2, abs=1e-6)
    assert overhead_s == pytest.approx(0.05, abs=1e-6)


def test_a_host_path_the_runs_do_not_show_is_left_out() -> None:
    # The wave alone: 0.05 + 0.03 = 0.08; 0.08 + 0.15 = 0.23; 0.12 + 0.30 = 0.42;
    # 0.30 + 0.60 = 0.90; 0.40 + 1.20 = 1.60; 0.20 + 0.21 = 0.41.
    chosen, (share, overhead_s) = choose_ttft_terms(_slopes([0.08, 0.23, 0.42, 0.90, 1.60, 0.41]))
    assert share == pytest.approx(0.3, abs=1e-6)
    assert overhead_s == pytest.approx(0.0, abs=1e-6)
    assert chosen in ("both", "wave")


def test_one_family_gives_no_folds_and_no_terms() -> None:
    slopes = _slopes([0.12, 0.23, 0.37, 0.75, 1.25, 0.39])
    one = slopes.subset(np.array([f == "a" for f in FAMILIES]))
    assert choose_ttft_terms(one) == ("none", (0.0, 0.0))


def test_the_default_profile_carries_its_ttft_terms() -> None:
    roofline = load_engine_coefficients()[DEFAULT_ENGINE].roofline
    assert 0.0 < roofline.ttft_wave_share <= 1.0
    assert 0.0 < roofline.request_overhead_s <= 1.0
    moved = with_ttft_terms(load_engine_coefficients()[DEFAULT_ENGINE], (0.25, 0.03)).roofline
    assert (moved.ttft_wave_share, moved.request_overhead_s) == (0.25, 0.03)
