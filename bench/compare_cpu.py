"""CPU time per estimate: this service vs llm-analysis and EcoLogits, on the same requests.

    python bench/compare_cpu.py [--venv /tmp/compare-venv] [--repeat 2000]
                                [--output bench/results/compare_cpu.md]

llm-analysis and EcoLogits are not dependencies of the project: they are installed from the
package registry into a throwaway virtual environment (`--venv`, created when missing), and
timed there by this same file run with `--theirs` (which imports nothing of the service).
Each call is timed with `time.process_time_ns` after a warm-up; the median per call is kept.
Ours: `Estimator.estimate` in-process (learned regressor on, and analytical alone), and the
server CPU per HTTP estimate from bench/results/load.json (uvicorn processes, quote stored)
when the load test has been run.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

# (label, model, gpu for ours, gpu config for llm-analysis, gpu count, batch, prompt, output)
CASES = (
    ("Llama-3.1-8B, 1x H100, batch 8, 512+256", "Llama-3.1-8B", "H100-SXM5-80GB",
     "h100-sxm-80gb", 1, 8, 512, 256),
    ("Llama-3.1-70B, 4x H100 TP4, batch 8, 512+256", "Llama-3.1-70B", "H100-SXM5-80GB",
     "h100-sxm-80gb", 4, 8, 512, 256),
    ("Llama-3.1-8B, 1x A100-80GB, batch 1, 2000+500", "Llama-3.1-8B", "A100-SXM4-80GB",
     "a100-sxm-80gb", 1, 1, 2000, 500),
)  # fmt: skip
# Llama 3.1 architectures (config.json of the Hugging Face repos), for llm-analysis. Its MLP
# has two matrices: Llama's gated MLP (three of intermediate_size 14336 / 28672) is given as
# two of 1.5x that width (same parameters and FLOPs), with the expansion ratio spelled out
# since it is not an integer (llm-analysis asserts divisibility otherwise).
ARCHITECTURES = {
    "Llama-3.1-8B": {"num_layers": 32, "n_head": 32, "hidden_dim": 4096, "vocab_size": 128256,
                     "num_key_value_heads": 8, "ffn_embed_dim": 21504, "expansion_ratio": 5.25,
                     "max_seq_len": 131072},
    "Llama-3.1-70B": {"num_layers": 80, "n_head": 64, "hidden_dim": 8192, "vocab_size": 128256,
                      "num_key_value_heads": 8, "ffn_embed_dim": 43008, "expansion_ratio": 5.25,
                      "max_seq_len": 131072},
}  # fmt: skip
THEIR_PACKAGES = ("llm-analysis", "ecologits")


def median_cpu_us(call: Callable[[], object], repeat: int, warmup: int = 20) -> float:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeat):
        started = time.process_time_ns()
        call()
        samples.append(time.process_time_ns() - started)
    return statistics.median(samples) / 1000


def time_theirs(repeat: int, our_latency_s: dict[str, float]) -> dict[str, Any]:
    """Run inside the throwaway venv: CPU µs per call of llm-analysis and EcoLogits."""
    logging.disable(logging.CRITICAL)  # llm-analysis logs its whole configuration per call
    from ecologits.tracers.utils import llm_impacts
    from llm_analysis.analysis import LLMAnalysis
    from llm_analysis.config import (
        ModelConfig,
        ParallelismConfig,
        get_dtype_config_by_name,
        get_gpu_config_by_name,
    )

    results: dict[str, Any] = {}
    for label, model, _, gpu, count, batch, prompt, output in CASES:
        analysis = partial(
            LLMAnalysis(
                ModelConfig(name=model, model_type="llama", **ARCHITECTURES[model]),
                get_gpu_config_by_name(gpu),
                get_dtype_config_by_name("w16a16e16"),
                ParallelismConfig(tp_size=count),
                flops_efficiency=0.6,
                hbm_memory_efficiency=0.8,
            ).inference,
            batch_size_per_gpu=batch,
            seq_len=prompt,
            num_tokens_to_generate=output,
        )
        # EcoLogits prices one chat request: model, output tokens and its measured latency
        # (given ours); it has no batch, prompt length, GPU type or count among its inputs.
        impacts = partial(
            llm_impacts,
            "huggingface_hub",
            f"meta-llama/Meta-{model}-Instruct",
            output,
            our_latency_s[label],
        )
        summary = analysis()
        energy = impacts().energy.value
        results[label] = {
            "llm_analysis_us": median_cpu_us(analysis, repeat),
            "llm_analysis_latency_s": summary["total_latency"],
            "ecologits_us": median_cpu_us(impacts, repeat),
            "ecologits_energy_kwh": [
                getattr(energy, "min", energy),
                getattr(energy, "max", energy),
            ],
        }
    return results


def time_ours(repeat: int) -> dict[str, dict[str, float]]:
    # This checkout's service, not whichever one the environment installed (run as a script,
    # the path starts at bench/, and an editable install may point at another tree).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from service.pricing.estimator import Estimator
    from service.pricing.regressor.runtime import (
        DEFAULT_METADATA_PATH,
        DEFAULT_MODEL_PATH,
        EnergyRegressor,
    )
    from service.schemas.estimate_request import EstimateRequest

    regressor = EnergyRegressor.load(DEFAULT_MODEL_PATH, DEFAULT_METADATA_PATH)
    learned = Estimator.from_catalogues(regressor=regressor)
    analytical = Estimator.from_catalogues(regressor=None)
    results: dict[str, dict[str, float]] = {}
    for label, model, gpu, _, count, batch, prompt, output in CASES:
        request = EstimateRequest.model_validate({
            "model": f"meta-llama/{model}-Instruct",
            "workload": {"batch_size": batch, "prompt_tokens": prompt, "output_tokens": output},
            "hardware": {"gpu": gpu, "count": count},
        })  # fmt: skip
        priced = learned.estimate(request, verbose=False, calibration=None).response
        results[label] = {
            "learned_us": median_cpu_us(
                partial(learned.estimate, request, verbose=False, calibration=None), repeat
            ),
            "analytical_us": median_cpu_us(
                partial(analytical.estimate, request, verbose=False, calibration=None), repeat
            ),
            "gpu_j": priced.energy.gpu_j,
            "total_s": priced.latency.total_s,
        }
    return results


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    check = [str(python), "-c", "import ecologits, llm_analysis"]
    if subprocess.run(check, capture_output=True).returncode != 0:
        install = [str(python), "-m", "pip", "install", "--quiet", *THEIR_PACKAGES]
        subprocess.run(install, check=True)
    return python


def installed_versions(python: Path) -> str:
    show = subprocess.run(
        [str(python), "-m", "pip", "show", *THEIR_PACKAGES], capture_output=True, text=True
    ).stdout
    names = [line.split(": ", 1)[1] for line in show.splitlines() if line.startswith("Name: ")]
    versions = [line.split(": ", 1)[1] for line in show.splitlines() if line.startswith("Version")]
    return ", ".join(f"{name} {version}" for name, version in zip(names, versions, strict=True))


def server_cpu_per_http_estimate_us(load_json: Path) -> dict[str, float]:
    """Server CPU per answered HTTP estimate at the lowest offered rate of each database."""
    if not load_json.is_file():
        return {}
    raw = json.loads(load_json.read_text())
    per_database = {}
    for database, steps in raw.items():
        lowest = min(steps, key=lambda step: step["offered_per_s"])
        per_database[database] = lowest["server_cpu_s"] / lowest["answered"] * 1e6
    return per_database


def report(
    ours: dict[str, dict[str, float]],
    theirs: dict[str, Any],
    server_us: dict[str, float],
    versions: str,
    repeat: int,
) -> list[str]:
    import datetime
    import shlex

    sys.path.insert(0, str(Path(__file__).parent))
    from load.report import machine_line

    lines = [
        "# CPU time per estimate: this service vs llm-analysis and EcoLogits",
        "",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine_line()}.",
        f"Command: `python {' '.join(shlex.quote(word) for word in sys.argv)}`",
        f"Theirs: {versions}, from the package registry into a throwaway venv.",
        "",
        f"Median CPU time per call (`time.process_time_ns`, {repeat} calls after a warm-up). "
        "Ratio = their CPU / our learned estimate's (below 1: theirs is cheaper).",
        "",
        "| request | ours, learned µs | ours, analytical µs | llm-analysis µs (ratio) "
        "| EcoLogits µs (ratio) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, mine in ours.items():
        other = theirs[label]
        learned = mine["learned_us"]
        lines.append(
            f"| {label} | {learned:.0f} | {mine['analytical_us']:.0f} "
            f"| {other['llm_analysis_us']:.0f} ({other['llm_analysis_us'] / learned:.2f}x) "
            f"| {other['ecologits_us']:.0f} ({other['ecologits_us'] / learned:.2f}x) |"
        )
    lines += ["", "What each answered for the same request:", ""]
    lines += ["| request | ours: gpu_j, total_s | llm-analysis: total latency s "
              "| EcoLogits: energy J (min-max) |", "|---|---|---|---|"]  # fmt: skip
    for label, mine in ours.items():
        other = theirs[label]
        low, high = other["ecologits_energy_kwh"]
        lines.append(
            f"| {label} | {mine['gpu_j']:.0f} J, {mine['total_s']:.2f} s "
            f"| {other['llm_analysis_latency_s']:.2f} | {low * 3.6e6:.0f}-{high * 3.6e6:.0f} |"
        )
    lines += [
        "",
        "What each can express: llm-analysis takes the architecture (given here from the "
        "models' config.json; Llama's gated three-matrix MLP as a two-matrix one of 1.5x the "
        "width, the closest it can express, same parameters and FLOPs), GPU, dtype, tensor "
        "parallelism, batch, prompt and output tokens, and returns latency and memory but no "
        "energy. EcoLogits takes only the model name, the output token count and a measured "
        "request latency (given ours); batch, prompt length, GPU type and count are not among "
        "its inputs (it assumes its own server), so its "
        "energy is not for the same deployment.",
        "",
    ]
    if server_us:
        lines.append(
            "Server CPU per HTTP estimate (uvicorn processes, parsing, validation, pricing, "
            "storing the quote, serialising; lowest step of bench/results/load.json): "
            + "; ".join(f"{db} {us:.0f} µs" for db, us in server_us.items())
            + "."
        )
    else:
        lines.append("Server CPU per HTTP estimate: run bench/load_test.py first.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/compare-venv"))
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--output", type=Path, default=Path("bench/results/compare_cpu.md"))
    parser.add_argument("--load-json", type=Path, default=Path("bench/results/load.json"))
    parser.add_argument("--theirs", help=argparse.SUPPRESS)  # JSON of our latencies: venv side
    args = parser.parse_args()
    if args.theirs is not None:
        print(json.dumps(time_theirs(args.repeat, json.loads(args.theirs))))
        return
    ours = time_ours(args.repeat)
    python = ensure_venv(args.venv)
    latencies = json.dumps({label: mine["total_s"] for label, mine in ours.items()})
    command = [str(python), __file__, "--repeat", str(args.repeat), "--theirs", latencies]
    theirs = json.loads(subprocess.run(command, check=True, capture_output=True).stdout)
    lines = report(
        ours,
        theirs,
        server_cpu_per_http_estimate_us(args.load_json),
        installed_versions(python),
        args.repeat,
    )
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
