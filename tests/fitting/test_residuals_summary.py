"""The residual diagnosis's grouped summary: MAPE and medians of predicted/measured by group."""

from __future__ import annotations

from offline.fitting.residuals import Line, summary


def _line(tensor: int, predicted_j: float, predicted_w: float) -> Line:
    return {
        "source": "mlenergy-v3",
        "tensor": tensor,
        "measured_j": 100.0,
        "predicted_j": predicted_j,
        "measured_tpot_s": 0.02,
        "predicted_tpot_s": 0.025,
        "measured_w": 400.0,
        "predicted_w": predicted_w,
    }


def test_summary_groups_and_scores_each_group() -> None:
    lines = [_line(1, 110.0, 440.0), _line(1, 80.0, 400.0), _line(4, 125.0, 500.0)]
    text = summary(lines, ("source", "tensor")).splitlines()
    # tensor 1: |1.1 - 1| and |0.8 - 1| -> 15.0 %; medians 0.95 energy, 1.25 time, 1.05 power
    assert text[1] == "  mlenergy-v3 / 1: 2, 15.0, 0.950, 1.250, 1.050"
    assert text[2] == "  mlenergy-v3 / 4: 1, 25.0, 1.250, 1.250, 1.250"
