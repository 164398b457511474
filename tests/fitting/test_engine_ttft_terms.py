"""An engine's TTFT terms (wave share, request overhead) recovered from runs whose measured
TTFT was made with known terms: TTFT = base + 0.2 x wave + 0.05 s, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from offline.fitting.engine_profiles import NO_TTFT_TERMS, Slopes, fit_ttft_terms

NO_OVERHEADS = (0.0, 0.0, 0.0, 0.0, 0.0)


def _slopes(ttft_s: list[float], wave_s: list[float], measured: list[float],
            continuous: bool = True) -> Slopes:  # fmt: skip
    n = len(ttft_s)
    zeros = np.zeros(n)
    return Slopes(
        tpot_s=np.full(n, 0.01),
        ttft_s=np.array(ttft_s),
        tpot_slope=np.zeros((n, 4)),
        ttft_slope=np.zeros((n, 4)),
        measured_tpot_s=np.full(n, 0.01),
        measured_ttft_s=np.array(measured),
        family=["f"] * n,
        gpu=["g"] * n,
        launch_s=0.0,
        layout=["TP only"] * n,
        lines=list(range(n)),
        wave_s=np.array(wave_s) + zeros,
        continuous=continuous,
    )


def test_known_terms_are_recovered() -> None:
    base = [0.05, 0.08, 0.12, 0.30, 0.40]
    wave = [0.10, 0.50, 1.00, 2.00, 4.00]
    # 0.05 + 0.2 x 0.10 + 0.05 = 0.12; 0.08 + 0.10 + 0.05 = 0.23; 0.12 + 0.20 + 0.05 = 0.37;
    # 0.30 + 0.40 + 0.05 = 0.75; 0.40 + 0.80 + 0.05 = 1.25.
    measured = [0.12, 0.23, 0.37, 0.75, 1.25]
    share, overhead_s = fit_ttft_terms(_slopes(base, wave, measured), NO_OVERHEADS)
    assert share == pytest.approx(0.2, abs=1e-6)
    assert overhead_s == pytest.approx(0.05, abs=1e-6)
    slopes = _slopes(base, wave, measured)
    assert slopes.predicted(NO_OVERHEADS, (0.2, 0.05))[1] == pytest.approx(measured)


def test_the_static_reading_has_no_terms() -> None:
    slopes = _slopes([0.1], [1.0], [0.5], continuous=False)
    assert fit_ttft_terms(slopes, NO_OVERHEADS) == NO_TTFT_TERMS
    assert slopes.predicted(NO_OVERHEADS, (0.2, 0.05))[1] == pytest.approx([0.1])
