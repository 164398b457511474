"""Train the GraphSAGE energy regressor on ML.ENERGY, validate it by leaving whole model families
out (with baselines and ablations), and export it to ONNX with its metadata and report.

    python -m offline.training.train --data ../shared/data --out models/ --time-weight 1

With --time-weight > 0 the network also has a time-per-output-token head (a log-correction of
the served analytical TPOT, its Huber loss times the weight), exported as a third output.
Writes models/energy_gnn.onnx, models/energy_gnn.json (version, feature spec and its sha256,
normalisation, interval, data sources with sha256, validation metrics),
models/energy_gnn_validation.md + .png and models/energy_gnn_training.log.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from offline.fitting.datasets import DEFAULT_DATA_DIR, data_source_digests, load_azure_trace
from offline.fitting.datasets_common import sha256_file
from offline.fitting.silicon_rows import SILICON_CSV
from offline.training.dataset import TrainingRow, load_training_rows, log_measured
from offline.training.export import MAX_ABS_DIFFERENCE, OPSET, max_abs_difference, onnx_bytes
from offline.training.fit import TrainConfig, TrainedModel, Variant, train_ensemble
from offline.training.folds import refitted_coefficients
from offline.training.report import Method, ReportInputs, write_report
from offline.training.serving_rows import load_serving_rows
from offline.training.validation import (
    Folds,
    Interval,
    Priors,
    baseline_cv,
    error_bounds,
    fixed_folds,
    regressor_cv,
    residual_interval,
)
from service.catalog import load_model_catalog
from service.catalog.engines import COEFFICIENTS_PATH
from service.core.memory import active_parameter_count
from service.pricing.regressor.encoding import INPUT_NAMES, output_names
from service.pricing.regressor.feature_spec import feature_spec, feature_spec_sha256
from service.pricing.regressor.runtime import sha256_bytes

logger = logging.getLogger("offline.training")

VERSION = "energy-gnn 2026.11.27.1"
CHOSEN = Variant("GNN", phase_split=True, roofline=True, direct=False, message_passing=True)
SEED_VARIANTS = {"GNN, other seed": 1, "GNN, third seed": 2}
"""Seed offsets of the seed-noise rows: the chosen design re-drawn (initialisation, bootstraps,
early-stopping models)."""
FIVE_MEMBERS = "5 members"
ABLATIONS = (
    (replace(CHOSEN, name="no phase split", phase_split=False), "one graph, prefill+decode summed"),
    (replace(CHOSEN, name="no roofline", roofline=False), "no roofline times/energy, no GPU rates"),
    (replace(CHOSEN, name="GNN, other seed"), "the chosen design, seed + 1: the noise floor"),
    (replace(CHOSEN, name="GNN, third seed"), "the chosen design, seed + 2: the noise floor"),
    (replace(CHOSEN, name=FIVE_MEMBERS), "the chosen design with 5 members (energy-gnn 2026.11.3)"),
)
"""The issue's two ablations, the seed noise floor and the smaller ensemble. Earlier versions
also ran "direct log" (predict log energy, not a correction), "no message passing" and "uniform
weights" (no focused-sampling weights); each scored worse than the chosen design (energy-gnn
2026.11.1: 22.6, 19.1 and 18.0 % MAPE against 16.9 %, seed + 1: 19.0 %); they were dropped to
keep the command within the time of a shared 2-core machine."""
INNER_MAPE_BY_PENALTY = {
    0.03: {
        "gemma": 9.96,
        "gpt-oss": 11.59,
        "llama": 11.26,
        "mistral": 11.62,
        "phi": 11.01,
        "qwen": 11.16,
        "starcoder": 11.44,
    },
    0.3: {
        "gemma": 10.48,
        "gpt-oss": 11.52,
        "llama": 11.17,
        "mistral": 11.54,
        "phi": 11.17,
        "qwen": 10.67,
        "starcoder": 11.27,
    },
    1.0: {
        "gemma": 10.52,
        "gpt-oss": 11.80,
        "llama": 11.63,
        "mistral": 12.51,
        "phi": 11.56,
        "qwen": 11.14,
        "starcoder": 11.31,
    },
    3.0: {
        "gemma": 10.31,
        "gpt-oss": 12.16,
        "llama": 11.74,
        "mistral": 12.80,
        "phi": 12.03,
        "qwen": 11.74,
        "starcoder": 11.51,
    },
}
"""The correction penalty, decided by inner validation (`python -m offline.training.inner_cv
--set members=5 --set correction_penalty=P --set seed=S --set served_target=0 --set
time_weight=0`, the design of that time; mean of seeds 20261122 and 20261123),
on the current cost model (roofline 2026.11.7): per outer fold, the MAPE [%] over inner
leave-one-family-out predictions of the other six families (the outer family never trained on
nor scored). 0.03 was energy-gnn 2026.11.1-3's value; 1.0 and 3.0 (a stronger pull towards the
analytical estimate) were added with roofline 2026.11.6. On roofline 2026.11.6 (energy-gnn
2026.11.8) the means were 11.9, 11.7, 12.0 and 12.3 %, gemma's fold taking 0.03 and
starcoder's 1.0; on roofline 2026.11.7 gemma's and phi's folds take 0.03, the other five 0.3."""
PENALTY = min(INNER_MAPE_BY_PENALTY, key=lambda p: sum(INNER_MAPE_BY_PENALTY[p].values()))
"""The final model's penalty: the best mean over the outer folds (0.3)."""
DEFAULTS = TrainConfig(correction_penalty=PENALTY, served_target=True, time_weight=1.0)
"""The shipped design. Time weight 1 (energy-gnn 2026.11.27.1 on): a TPOT head, the design that
`offline.training.grouped --time-weight 1` validated by family, GPU and engine; kept by inner
validation against 0, 0.5 and 2 (`python -m offline.training.inner_cv --set time_weight=W`,
the mean of the inner energy and TPOT MAPEs; bench/results/regressor_time_weight_inner.md)."""


def fold_penalty(family: str) -> float:
    """The penalty of the outer fold that holds `family` out: its own inner validation's best
    (the final model's where the table has no such fold)."""
    if family not in INNER_MAPE_BY_PENALTY[PENALTY]:
        return PENALTY
    return min(INNER_MAPE_BY_PENALTY, key=lambda p: INNER_MAPE_BY_PENALTY[p][family])


TRAINING_SOURCES = ("mlenergy-", "azure-llm-trace-2023/")
BASELINE_DESCRIPTIONS = {
    "analytical": "roofline cost model alone as the service quotes it (refitted per fold)",
    "llmcarbon": "FLOPs / (peak x utilisation) x TDP, utilisation fitted",
    "ecologits": "per output token = a x active params + b, fitted",
}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR, help="../shared/data")
    parser.add_argument("--out", type=Path, default=Path("models"))
    parser.add_argument("--no-cv", action="store_true", help="skip cross-validation (smoke runs)")
    parser.add_argument("--no-ablations", action="store_true")
    parser.add_argument(
        "--fold-coefficients",
        choices=("refit", "fixed"),
        default="refit",
        help="refit the cost model without each held-out family (default), or use the fitted "
        "coefficients in every fold (faster, optimistic; smoke runs)",
    )
    parser.add_argument("--limit", type=int, default=None, help="use only the first N rows")
    parser.add_argument("--epochs", type=int, default=DEFAULTS.epochs)
    parser.add_argument("--members", type=int, default=DEFAULTS.members)
    parser.add_argument("--hidden", type=int, default=DEFAULTS.hidden)
    parser.add_argument(
        "--time-weight",
        type=float,
        default=DEFAULTS.time_weight,
        help="weight of the time-per-output-token head's loss (0: no time head)",
    )
    parser.add_argument(
        "--serving-rows",
        action="store_true",
        help="also train the final model on aiconfigurator's serving runs (TPOT only; the "
        "family cross-validation stays on ML.ENERGY rows)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    torch.set_num_threads(args.threads)
    started = time.monotonic()
    config = replace(
        DEFAULTS,
        hidden=args.hidden,
        members=args.members,
        epochs=args.epochs,
        progress=not args.quiet,
        time_weight=args.time_weight,
        serving_rows=args.serving_rows,
    )
    rows, skipped = load_training_rows(args.data, args.limit)
    logger.info("%d ML.ENERGY rows, %d left out", len(rows), len(skipped))
    priors = load_priors(args.data)
    y = log_measured(rows)
    validation: dict[str, Any] | None = None
    interval = Interval(0.1, 0.9, 1.0, 1.0, float("nan"), {})
    if not args.no_cv:
        folds = cross_validation_folds(args, rows)
        validation, interval = cross_validation(args, rows, y, folds, priors, config)
    final_rows = rows + (load_serving_rows(args.data)[0] if config.serving_rows else [])
    weights = priors.weights(final_rows, CHOSEN.focused)
    model = train_ensemble(final_rows, weights, CHOSEN, config, "final")
    model_bytes = onnx_bytes(model, rows[:4])
    difference = max_abs_difference(model, model_bytes, rows)
    logger.info("ONNX: %d bytes, max |onnx - torch| = %.2e", len(model_bytes), difference)
    if difference > MAX_ABS_DIFFERENCE:
        raise SystemExit(f"ONNX differs from torch by {difference:.2e} > {MAX_ABS_DIFFERENCE}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "energy_gnn.onnx").write_bytes(model_bytes)
    document = metadata(args, model, model_bytes, config, interval, validation, final_rows)
    document["onnx_check"] = {"max_abs_difference": difference, "rows": len(rows)}
    (args.out / "energy_gnn.json").write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    write_log(args.out / "energy_gnn_training.log", model, started)
    logger.info("wrote %s in %.0f s", args.out, time.monotonic() - started)
    return 0


def load_priors(data_dir: Path) -> Priors:
    """Catalogue model sizes and Azure-trace output lengths (code and conversation pooled)."""
    sizes = [
        active_parameter_count(r.architecture)
        for r in load_model_catalog().records
        if r.architecture
    ]
    outputs = [load_azure_trace(data_dir, kind)[1] for kind in ("code", "conversation")]
    return Priors(np.array(sizes, dtype=np.float64), np.concatenate(outputs).astype(np.float64))


def cross_validation_folds(args: argparse.Namespace, rows: list[TrainingRow]) -> Folds:
    """Every row encoded, per held-out family, with a cost model refitted without it."""
    if args.fold_coefficients == "fixed":
        return fixed_folds(rows)
    families = sorted({r.family for r in rows})
    logger.info("refitting the cost model without each of %d families ...", len(families))
    refitted = refitted_coefficients(args.data, families)
    return {f: load_training_rows(args.data, args.limit, refitted[f])[0] for f in families}


def cross_validation(
    args: argparse.Namespace,
    rows: list[TrainingRow],
    y: np.ndarray,
    folds: Folds,
    priors: Priors,
    config: TrainConfig,
) -> tuple[dict[str, Any], Interval]:
    """Held-out predictions of every method, the report, and the metrics for the metadata."""
    baselines = baseline_cv(folds)
    per_fold = {f: replace(config, correction_penalty=fold_penalty(f)) for f in folds}
    regressor = regressor_cv(folds, CHOSEN, per_fold, priors)
    ablations = []
    if not args.no_ablations:
        ablations = [
            Method(
                v.name,
                text,
                regressor_cv(folds, v, {f: _seeded(c, v) for f, c in per_fold.items()}, priors),
            )
            for v, text in ABLATIONS
        ]
    interval = residual_interval(rows, regressor, y)
    inputs = ReportInputs(
        rows=rows,
        log_measured=y,
        baselines=[Method(k, BASELINE_DESCRIPTIONS[k], v) for k, v in baselines.items()],
        regressor=Method(CHOSEN.name, "GraphSAGE, log-correction per phase", regressor),
        ablations=ablations,
        interval=interval,
        header=report_header(rows, config, args),
        notes=report_notes(args.fold_coefficients),
    )
    write_report(args.out / "energy_gnn_validation.md", inputs)
    metrics = {
        m.name: asdict(error_bounds(m.log_predicted, y))
        for m in [inputs.regressor, *inputs.baselines, *ablations]
    }
    by_source = {
        source: {
            m.name: asdict(error_bounds(m.log_predicted[mask], y[mask]))
            for m in [inputs.regressor, *inputs.baselines]
        }
        for source in sorted({r.source for r in rows})
        for mask in [np.array([r.source == source for r in rows])]
    }
    return {"held_out_families": metrics, "by_source": by_source}, interval


def _seeded(config: TrainConfig, variant: Variant) -> TrainConfig:
    """The training configuration of an ablation row: another seed for the seed-noise rows
    (initialisation, bootstraps and early-stopping models re-drawn), 5 members for the
    smaller-ensemble row, else the chosen one."""
    if variant.name == FIVE_MEMBERS:
        return replace(config, members=5)
    return replace(config, seed=config.seed + SEED_VARIANTS.get(variant.name, 0))


def command(args: argparse.Namespace) -> str:
    """The command line that makes the shipped files with `args`' design choices."""
    ablations = " --no-ablations" if args.no_ablations else ""
    return (
        "python -m offline.training.train --data ../shared/data --out models/"
        f"{ablations} --time-weight {args.time_weight:g}"
        + " --serving-rows"
        * bool(args.serving_rows)
    )


def report_header(rows: list[TrainingRow], config: TrainConfig, args: argparse.Namespace) -> str:
    families = sorted({r.family for r in rows})
    return (
        f"Made by `{command(args)}` "
        f"({VERSION}, {datetime.now(UTC).isoformat(timespec='seconds')}). Every number is a "
        f"prediction for a row whose whole model family was left out of training "
        f"({len(families)} folds: {', '.join(families)}; {len(rows)} ML.ENERGY rows, energy per "
        f"request x batch = the request's GPU energy). Ensembles of {config.members} members, "
        f"hidden width {config.hidden}, early stopping on whole held-out models of the "
        f"training folds; time weight {config.time_weight:g} (a time-per-output-token head, "
        "validated by family, GPU and engine in `bench/results/regressor_latency_head.md`). "
        "Data: ML.ENERGY leaderboard v2 and v3 (Apache-2.0); focused-sampling "
        "priors from the model catalogue and the Azure LLM inference trace 2023 (CC-BY-4.0)."
    )


def report_notes(fold_coefficients: str) -> list[str]:
    if fold_coefficients == "refit":
        analytical = (
            "In each fold the analytical cost model is refitted without the held-out family, "
            "exactly as `fit_cost_model`'s leave-one-family-out (kernel efficiencies on Vidur, "
            "host overheads and power on the end-to-end rows); the `analytical` column and the "
            "analytical estimate the regressor corrects both come from those coefficients."
        )
    else:
        analytical = (
            "Every fold used the committed cost-model coefficients, which were fitted on all "
            "families: the `analytical` column and the regressor's input are optimistic."
        )
    return [
        analytical,
        "Cost model of the analytical estimate: roofline 2026.11.7 (energy-gnn 2026.11.9; "
        "network and hyperparameters unchanged, per-fold penalties re-decided, see below) "
        "adds Gemma's norms: Gemma 2 and 3 also normalise each sub-layer's output (4 RMSNorms "
        "per layer, graph nodes attn_output_norm and mlp_output_norm), and vLLM 0.5.4 ran "
        "Gemma's (1 + weight) RMSNorm as separate fp32 PyTorch ops (no kernel until vLLM PR "
        "#7642), priced at 40 bytes per element instead of 4 for the ML.ENERGY v2 rows "
        "(`bench/results/gemma_residuals.md`). "
        "Power model (roofline 2026.11.6): the power drawn during "
        "host-overhead time is fitted per serving engine, and a collective's step latency "
        "counts in its time but not in its power share (since energy-gnn 2026.11.3). New in "
        "roofline 2026.11.6 (energy-gnn 2026.11.7 and 2026.11.8; network and hyperparameters "
        "unchanged, per-fold penalties re-decided, see below): each engine's decode host time "
        "draws two fitted powers, one over "
        "the fixed time per step (the CPU scheduling the step, GPUs near idle: fitted 0.04 of "
        "TDP - idle for both vLLM engines) and one over the time per running sequence (vLLM "
        "0.11: 0.98, GPU work the roofline misses; vLLM 0.5.4: 0.39), because the v3 rows' own "
        "power rises with the batch (Llama-3.1-8B: ~490 W at 8 sequences, ~690 W at 192 and "
        "more) where one fraction for both parts held it flat. Since roofline "
        "2026.11.4 (energy-gnn 2026.11.5): host time per decode step has a part per GPU worker "
        "beyond the first, fitted per vLLM engine, during which the GPUs wait on the driver at "
        "idle power. Since roofline 2026.11.5 (energy-gnn 2026.11.6, network, hyperparameters "
        "and per-fold penalties unchanged): block-scaled FP8 checkpoints (128 x 128 weight "
        "blocks: Qwen3 FP8, DeepSeek-V3/R1) have their routed-expert GEMMs timed at the 16-bit "
        "weight size, as vLLM's block-FP8 fused-MoE kernel ran no faster than bf16 (vLLM PR "
        "#46642, issue #25540); `bench/results/cost_model_validation.md`.",
        "LLMCarbon-style and EcoLogits-style rows refit their one or two factors per fold.",
        "Prompt lengths are the data README's task means, not per-row values; ML.ENERGY rows "
        "are steady states of a saturated server, which the regressor learns in their static "
        "reading (a batch of the running sequences, `continuous_energy.static_reading`): the "
        "reading the service corrects a continuous quote by.",
        "Hyperparameters (width, learning rate, loss, patience) are those of energy-gnn "
        "2026.11.1, not tuned on held-out families; each member is early-stopped on whole "
        "models of its training fold. energy-gnn 2026.11.4 changes two things. (1) 10 "
        "ensemble members instead of 5, against seed noise: 5-member ensembles of 2026.11.3's "
        "design scored 13.4, 15.5, 16.3 and 15.3 % MAPE with seeds 20261122-25 (the shipped "
        "13.4 was the luckiest), and 10 members still infer within the 100 µs budget "
        "(`bench/results/regressor.md`). (2) The correction penalty 0.3 instead of 0.03 (a "
        "stronger pull towards the analytical estimate), decided by inner validation "
        "(`python -m offline.training.inner_cv`): within each outer fold, the other six "
        "families left out in turn; mean of two seeds, inner MAPE 14.0 % against 14.4 %. "
        "energy-gnn 2026.11.8 re-decided the penalty on roofline 2026.11.6 with the same inner "
        "validation over 0.03, 0.3, 1.0 and 3.0 (inner MAPE 11.9, 11.7, 12.0, 12.3 %), and "
        "energy-gnn 2026.11.9 on roofline 2026.11.7 (11.15, 11.12, 11.50, 11.76 %): the "
        "final model keeps 0.3; per outer fold its own inner best (`INNER_MAPE_BY_PENALTY`): "
        "gemma and phi 0.03, the other five 0.3 (on roofline 2026.11.6: gemma 0.03, starcoder "
        "1.0, the other five 0.3). "
        "Rejected by the "
        "same inner validation (one seed, against 14.3 and 14.6 % for the 2026.11.3 design): "
        "weighting every model-GPU series equally (14.2 %) and hiding the precision bits from "
        "the network (14.1 %). The GNN rows with other seeds show the remaining noise.",
    ]


def metadata(
    args: argparse.Namespace,
    model: TrainedModel,
    model_bytes: bytes,
    config: TrainConfig,
    interval: Interval,
    validation: dict[str, Any] | None,
    rows: list[TrainingRow],
) -> dict[str, Any]:
    coefficients = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    return {
        "model": "energy_gnn",
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command(args),
        "onnx_sha256": sha256_bytes(model_bytes),
        "onnx_opset": OPSET,
        "inputs": list(INPUT_NAMES),
        "outputs": list(output_names(model.gnn.config.time_outputs > 0)),
        "feature_spec": feature_spec(),
        "feature_spec_sha256": feature_spec_sha256(),
        "normalisation": model.normalisation.as_dict(),
        "design": {
            "variant": asdict(model.variant),
            "train_config": {k: v for k, v in asdict(config).items() if k != "progress"},
            "best_epochs": model.best_epochs,
            "target": "log GPU energy of the request [log J] = log-sum-exp over phases of "
            "(log analytical phase energy + learned correction); ensemble mean of members",
            "time_target": "log(measured / served analytical time per output token), "
            "ensemble mean of members (output log_tpot_correction; none when time_weight is 0)",
            "grouped_validation": "bench/results/regressor_latency_head.md: this design "
            "(members, width, penalties, served target, time weight) by family, GPU and engine",
            "time_head_engines": time_head_engines(rows, model),
        },
        "interval": {
            "lower_quantile": interval.lower_quantile,
            "upper_quantile": interval.upper_quantile,
            "low_ratio": interval.low_ratio,
            "high_ratio": interval.high_ratio,
            "source": "quantiles of measured/predicted over leave-one-family-out predictions",
            "nested_coverage_pct": interval.nested_coverage_pct,
        },
        "coefficients": {
            "version": coefficients["version"],
            "sha256": sha256_file(COEFFICIENTS_PATH),
        },
        "training_rows": len(rows),
        "data_sources": data_sources(args.data, config.serving_rows),
        "validation": validation,
    }


def time_head_engines(rows: list[TrainingRow], model: TrainedModel) -> list[str]:
    """The engine profiles of the training rows: the only ones the service applies the time
    head to, since on an engine held out of training it raised the TPOT error
    (`bench/results/regressor_latency_head.md`, engine out). Empty without a time head."""
    if model.gnn.config.time_outputs == 0:
        return []
    return sorted({r.engine for r in rows})


def data_sources(data_dir: Path, serving_rows: bool = False) -> dict[str, Any]:
    """sha256 of every file used: training (ML.ENERGY, Azure trace priors, with `serving_rows`
    aiconfigurator's serving runs) and the per-fold cost-model refits of the validation (also
    Splitwise and Vidur)."""
    digests = data_source_digests(data_dir)
    training = {p: d for p, d in digests.items() if p.startswith(TRAINING_SOURCES)}
    if serving_rows:
        training[SILICON_CSV] = sha256_file(data_dir / SILICON_CSV)
    return {
        "training": training,
        "validation_cost_model_refits": {
            p: d for p, d in digests.items() if not p.startswith(TRAINING_SOURCES)
        },
        "licences": {
            "mlenergy": "Apache-2.0",
            "azure-llm-trace-2023": "CC-BY-4.0",
            "splitwise": "MIT",
            "vidur": "MIT",
            **({"aiconfigurator": "Apache-2.0"} if serving_rows else {}),
        },
    }


def write_log(path: Path, model: TrainedModel, started: float) -> None:
    lines = ["epoch,train_loss,validation_loss"]
    lines += [f"{e['epoch']},{e['train']:.6f},{e['validation']:.6f}" for e in model.log]
    lines.append(f"# best epochs per member: {model.best_epochs}")
    lines.append(f"# wall time: {time.monotonic() - started:.0f} s")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
