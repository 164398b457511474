"""Power traces (update times, update period, time-weighted mean) and the run-to-run figures of
two campaigns, on hand-built campaign folders written by the campaign's own writer; every
expected number is worked by hand in the comments."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from offline.measure.budget import CampaignRun
from offline.measure.campaign_output import read_campaign
from offline.measure.power_trace import (
    campaign_update_period_s,
    time_weighted_mean_w,
    update_period_s,
    update_times_s,
)
from offline.measure.repeatability import main, repeatability
from tests.measure.campaign_support import write_test_campaign

# A trace that reads 300 W, then 600 W from 0.1 s, then 300 W again from 0.2 s; the sampler
# bunched three samples at 0.10-0.14 s and then waited 0.2 s.
T_S = [0.0, 0.1, 0.12, 0.14, 0.2, 0.4]
W = [300.0, 600.0, 600.0, 600.0, 300.0, 300.0]


def test_updates_period_and_time_weighted_mean_of_a_trace() -> None:
    assert update_times_s(T_S, W) == [0.1, 0.2]
    assert update_period_s(T_S, W) == pytest.approx(0.1)
    # 300 W for 0.1 s, 600 W for 0.1 s, 300 W for 0.2 s: 150 J over 0.4 s = 375 W (the plain
    # mean of the six samples would be 450 W).
    assert time_weighted_mean_w(T_S, W) == pytest.approx(375.0)
    assert update_period_s([0.0, 0.1], [300.0, 600.0]) is None  # one update, no interval
    assert time_weighted_mean_w([0.5], [300.0]) is None
    # Updates at 0.1, 0.3, 0.4, 0.5 s: intervals 0.2, 0.1, 0.1, median 0.1 s.
    t = [0.0, 0.1, 0.3, 0.4, 0.5]
    assert update_period_s(t, [1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(0.1)
    traces = {"a": (t, [1.0, 2.0, 3.0, 4.0, 5.0]), "b": (T_S, W), "c": ([0.0], [1.0])}
    assert campaign_update_period_s(traces) == pytest.approx(0.1)


def folder(
    root: Path, name: str, gpu: str, latency_ms: list[float], power_w: list[float], scale: float
) -> Path:
    """A campaign of three GEMMs, a trace (T_S, W x scale) for the first, and one phase."""
    run = CampaignRun()
    run.rows["gemm_perf"] = [
        {"item": f"g{i}", "m": 1, "n": 8, "k": 8, "gemm_dtype": "bfloat16"}
        | {"latency": latency, "power": power}
        for i, (latency, power) in enumerate(zip(latency_ms, power_w, strict=True))
    ]
    run.rows["power_samples"] = [
        {"item": "g0", "t_s": t, "power_w": w * scale} for t, w in zip(T_S, W, strict=True)
    ]
    run.rows["end_to_end"] = [{"item": "m", "phase": "decode", "time_s": latency_ms[0]}]
    return write_test_campaign(root / name, run, gpu=gpu)


def test_two_campaigns_give_sd_and_largest_log_ratio(tmp_path: Path) -> None:
    e = math.exp
    a = folder(tmp_path, "a", "H200-SXM-141GB", [1.0, 2.0, 4.0], [500.0, 600.0, 700.0], 1.0)
    # B: latencies x e^0.02, e^-0.02, 1 (logs 0.02, -0.02, 0: sd sqrt(0.0008 / 2) = 0.02,
    # largest 0.02); counter powers x e^0.1, 1, e^-0.1 (sd 0.1, largest 0.1); the trace x 1.2
    # (one pair: log 1.2 = 0.1823, no sd).
    b = folder(
        tmp_path,
        "b",
        "H200-SXM-141GB",
        [1.0 * e(0.02), 2.0 * e(-0.02), 4.0],
        [500.0 * e(0.1), 600.0, 700.0 * e(-0.1)],
        1.2,
    )
    result = repeatability(read_campaign(a), read_campaign(b))
    got = {s.reading: s for s in result.spreads}
    assert (got["latency"].pairs, got["latency"].sd_log) == (3, pytest.approx(0.02))
    assert got["latency"].max_abs_log == pytest.approx(0.02)
    assert got["counter power"].sd_log == pytest.approx(0.1)
    assert got["counter power"].max_abs_log == pytest.approx(0.1)
    assert got["trace power"].pairs == 1 and math.isnan(got["trace power"].sd_log)
    assert got["trace power"].max_abs_log == pytest.approx(math.log(1.2))
    assert got["end-to-end phase time"].max_abs_log == pytest.approx(0.02)  # g0's latency
    assert result.update_period_s == (pytest.approx(0.1), pytest.approx(0.1))


def test_the_command_prints_the_table_and_refuses_different_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = folder(tmp_path, "a", "H200-SXM-141GB", [1.0, 2.0, 4.0], [500.0, 600.0, 700.0], 1.0)
    b = folder(tmp_path, "b", "H200-SXM-141GB", [1.0, 2.0, 4.0], [500.0, 600.0, 700.0], 1.0)
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| latency | 3 | 0.0 % | 0.0 % |" in out
    assert "meter update period of a: 100.0 ms" in out
    h100 = folder(tmp_path, "h100", "H100-SXM5-80GB", [1.0], [500.0], 1.0)
    assert main([str(a), str(h100)]) == 2
