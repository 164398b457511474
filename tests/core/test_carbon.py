"""The carbon model against numbers worked by hand: operational, embodied, water, and their bounds.

One request is used throughout: 2 GPUs of an 8-GPU server draw 1800 J over 2.0 s; the server's
non-GPU parts draw 1000 W and embodied 5700 kgCO2e; each GPU embodies 164 kgCO2e; PUE 1.25,
grid 400 gCO2e/kWh, 5-year life fully used, WUE 0.3 L/kWh on site, 3.13 L/kWh off site.
"""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from service.core.carbon import (
    JOULES_PER_KWH,
    SECONDS_PER_YEAR,
    CarbonFactors,
    operational_carbon_g,
    request_carbon,
)
from service.core.embodied import amortised_share, embodied_carbon_g
from service.core.facility import ServerProfile
from service.core.uncertainty import Ranged

SERVER = ServerProfile(8, Ranged(1000.0), Ranged(5700.0))


def factors(**changes: object) -> CarbonFactors:
    values: dict[str, object] = {
        "gpu_count": 2,
        "server": SERVER,
        "carbon_intensity_g_per_kwh": Ranged(400.0),
        "pue": Ranged(1.25),
        "gpu_embodied_kg_co2e": Ranged(164.0),
        "lifetime_years": Ranged(5.0),
        "utilisation": Ranged(1.0),
        "wue_l_per_kwh": Ranged(0.3),
        "offsite_water_l_per_kwh": Ranged(3.13),
    }
    values.update(changes)
    return CarbonFactors(**values)  # type: ignore[arg-type]


def test_operational_worked_example() -> None:
    # Server share: 2 of 8 GPUs -> 0.25 x 1000 W = 250 W, x 2.0 s = 500 J.
    # IT energy: 1800 + 500 = 2300 J; facility: 2300 x 1.25 = 2875 J.
    # 2875 J / 3.6e6 J/kWh = 7.986111e-4 kWh; x 400 g/kWh = 0.3194444 gCO2e.
    result = request_carbon(Ranged(1800.0), 2.0, factors())
    assert_allclose(result.server_overhead_w.value, 250.0)
    assert_allclose(result.server_overhead_j.value, 500.0)
    assert_allclose(result.it_j.value, 2300.0)
    assert_allclose(result.facility_j.value, 2875.0)
    assert_allclose(result.operational_g.value, 0.3194444, rtol=1e-6)
    assert_allclose(operational_carbon_g(2875.0, 400.0), 0.3194444, rtol=1e-6)
    # 16 GPUs hold two whole servers: 2 x 1000 W.
    many = request_carbon(Ranged(1800.0), 2.0, factors(gpu_count=16))
    assert_allclose(many.server_overhead_w.value, 2000.0)


def test_embodied_worked_example() -> None:
    # Held hardware: 2 x 164 = 328 kg of GPUs + 0.25 x 5700 = 1425 kg of server = 1753 kg.
    # 5 years = 5 x 365.25 x 86400 = 157,788,000 s; 2.0 s of it is 1.2675236e-8.
    # 1753 kg x 1000 g/kg x 1.2675236e-8 = 0.02221969 g (GPUs 0.00415748, server 0.01806221).
    result = request_carbon(Ranged(1800.0), 2.0, factors())
    assert_allclose(SECONDS_PER_YEAR * 5, 157_788_000.0)
    assert_allclose(result.embodied.gpus_g.value, 0.00415748, rtol=1e-6)
    assert_allclose(result.embodied.server_g.value, 0.01806221, rtol=1e-6)
    assert_allclose(result.embodied_g.value, 0.02221969, rtol=1e-6)
    # Half the life idle: every served second carries twice the share -> 0.04443938 g.
    idle = request_carbon(Ranged(1800.0), 2.0, factors(utilisation=Ranged(0.5)))
    assert_allclose(idle.embodied_g.value, 0.04443938, rtol=1e-6)
    # A whole lifetime of one GPU is its whole embodied carbon.
    assert_allclose(embodied_carbon_g(164.0, 5 * SECONDS_PER_YEAR, 5.0), 164_000.0)
    assert_allclose(amortised_share(SECONDS_PER_YEAR, 4.0, 0.5), 0.5)


def test_water_worked_example() -> None:
    # On site: WUE is per kWh of IT energy: 2300 J = 6.388889e-4 kWh x 0.3 L/kWh = 1.916667e-4 L.
    # Off site: the grid supplies the facility energy: 2875 J = 7.986111e-4 kWh x 3.13 L/kWh
    # = 2.499653e-3 L. Total 2.691319e-3 L.
    water = request_carbon(Ranged(1800.0), 2.0, factors()).water
    assert_allclose(water.onsite_l.value, 1.916667e-4, rtol=1e-6)
    assert_allclose(water.offsite_l.value, 2.499653e-3, rtol=1e-6)
    assert_allclose(water.total_l.value, 2.691319e-3, rtol=1e-6)


def test_total_is_operational_plus_embodied() -> None:
    result = request_carbon(Ranged(1800.0), 2.0, factors())
    # 0.3194444 + 0.02221969 = 0.3416641 gCO2e.
    assert_allclose(result.total_g.value, 0.3416641, rtol=1e-6)
    assert_allclose(result.total_g.value, result.operational_g.value + result.embodied_g.value)


def test_bounds_worked_example() -> None:
    # Energy 0.8-1.25x, PUE 1.1-1.5 (ratios 0.88, 1.2), intensity 0.85-1.15x, server power exact.
    # IT energy bounds add: low 1800 x 0.8 + 500 = 1940 J (ratio 0.843478), high 2250 + 500 =
    # 2750 J (ratio 1.195652).
    # Operational low ratio = exp(-sqrt(ln(0.843478)^2 + ln(0.88)^2 + ln(0.85)^2))
    #   = exp(-sqrt(0.028975 + 0.016341 + 0.026412)) = exp(-0.267823) = 0.765043;
    # high ratio = exp(sqrt(ln(1.195652)^2 + ln(1.2)^2 + ln(1.15)^2))
    #   = exp(sqrt(0.031931 + 0.033241 + 0.019533)) = exp(0.291042) = 1.337820.
    result = request_carbon(
        Ranged(1800.0, 0.8, 1.25),
        2.0,
        factors(pue=Ranged(1.25, 0.88, 1.2), carbon_intensity_g_per_kwh=Ranged(400.0, 0.85, 1.15)),
    )
    assert_allclose(result.it_j.low, 1940.0)
    assert_allclose(result.it_j.high, 2750.0)
    assert_allclose(result.operational_g.low_ratio, 0.765043, rtol=1e-5)
    assert_allclose(result.operational_g.high_ratio, 1.337820, rtol=1e-5)
    # Embodied figures are exact here, so total bounds = operational bounds + embodied.
    assert_allclose(result.total_g.low, result.operational_g.low + result.embodied_g.value)
    assert_allclose(result.total_g.high, result.operational_g.high + result.embodied_g.value)


def test_lifetime_and_utilisation_bounds_invert() -> None:
    # Life 3-6 years around 5: charge ratio 5/6 = 0.833333 .. 5/3 = 1.666667.
    result = request_carbon(
        Ranged(1800.0), 2.0, factors(lifetime_years=Ranged.from_bounds(5.0, 3.0, 6.0))
    )
    assert_allclose(result.embodied_g.low_ratio, 5 / 6)
    assert_allclose(result.embodied_g.high_ratio, 5 / 3)


def test_joules_per_kwh() -> None:
    assert JOULES_PER_KWH == 3.6e6
    with pytest.raises(ValueError):
        amortised_share(1.0, 5.0, 0.0)
