"""Cross-validation folds whose analytical inputs never saw the held-out family.

The regressor corrects the analytical estimate, and the analytical model's coefficients are
themselves fitted on ML.ENERGY. Validating with the committed coefficients would let every fold
peek at its held-out family through them; so each fold refits the cost model without that
family, exactly as ``fit_cost_model``'s leave-one-family-out does (kernel efficiencies on Vidur,
host overheads and power on the end-to-end rows), and encodes every row with those
coefficients.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from offline.fitting.family_folds import FoldData, fit_without
from service.core.coefficients import CostModelCoefficients

EngineCoefficients = dict[str, CostModelCoefficients]


def refitted_coefficients(data_dir: Path, families: Sequence[str]) -> dict[str, EngineCoefficients]:
    """For each family, the cost model's coefficients (per engine) fitted without it."""
    data = FoldData.load(data_dir)
    out: dict[str, EngineCoefficients] = {}
    for family in families:
        fitted = fit_without(data, family).model
        out[family] = {
            engine: fitted.coefficients(data.base, engine) for engine in fitted.overheads
        }
    return out
