"""How bounds combine, against numbers worked by hand."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from service.core.uncertainty import Ranged, product, total


def test_product_combines_log_ratios_in_quadrature() -> None:
    # 10 (0.8x-1.25x) times 2 (0.5x-2x) = 20;
    # low ratio = exp(-sqrt(ln(0.8)^2 + ln(0.5)^2)) = exp(-sqrt(0.049793 + 0.480453))
    #           = exp(-0.728180) = 0.482787, high ratio = exp(+0.728180) = 2.071307.
    combined = product(Ranged(10.0, 0.8, 1.25), Ranged(2.0, 0.5, 2.0))
    assert_allclose(combined.value, 20.0)
    assert_allclose(combined.low_ratio, 0.482787, rtol=1e-5)
    assert_allclose(combined.high_ratio, 2.071307, rtol=1e-5)
    # Interval arithmetic would give 0.4x-2.5x: quadrature is narrower.
    assert combined.low_ratio > 0.4 and combined.high_ratio < 2.5


def test_sum_adds_bounds() -> None:
    # (10, 8..12.5) + (5, 3..7) = 15 with bounds 11..19.5 (ratios 0.733333, 1.3).
    summed = total(Ranged(10.0, 0.8, 1.25), Ranged(5.0, 0.6, 1.4))
    assert_allclose([summed.value, summed.low, summed.high], [15.0, 11.0, 19.5])
    assert_allclose(summed.low_ratio, 11 / 15)


def test_inverse_swaps_bounds_and_exact_values_stay_exact() -> None:
    life = Ranged.from_bounds(5.0, 3.0, 6.0)
    assert_allclose([life.low_ratio, life.high_ratio], [0.6, 1.2])
    rate = life.inverse()
    # 1/5 = 0.2 per year, between 1/6 (ratio 5/6) and 1/3 (ratio 5/3).
    assert_allclose([rate.value, rate.low_ratio, rate.high_ratio], [0.2, 5 / 6, 5 / 3])
    exact = product(Ranged(3.0), Ranged(4.0))
    assert (exact.value, exact.low_ratio, exact.high_ratio) == (12.0, 1.0, 1.0)
    assert total(Ranged(0.0), Ranged(0.0)) == Ranged(0.0)


def test_bounds_must_bracket_the_value() -> None:
    with pytest.raises(ValueError):
        Ranged(1.0, 1.1, 1.2)
    with pytest.raises(ValueError):
        Ranged(-1.0)
