"""Training one ensemble: weighted Huber loss on log request energy, AdamW, full batch, bagging
with early stopping per member on whole models it did not train on, fixed seed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch
from tqdm import tqdm

from offline.training.dataset import TrainingRow, log_tpot_ratio
from offline.training.model import EnergyGNN, ModelConfig, ServingModel, log_request_j
from service.pricing.regressor.encoding import Normalisation, request_inputs
from service.pricing.regressor.feature_spec import (
    GLOBAL_FEATURE_GROUPS,
    GLOBAL_FEATURES,
    NODE_PHASE_FEATURES,
    NODE_STATIC_FEATURES,
    ROOFLINE_GLOBAL_FEATURES,
    ROOFLINE_NODE_FEATURES,
)
from service.pricing.regressor.features import RequestFeatures

logger = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Variant:
    """One design point of the ablation."""

    name: str
    phase_split: bool = True
    roofline: bool = True
    direct: bool = False
    message_passing: bool = True
    focused: bool = True
    precision_bits: bool = True


@dataclass(frozen=True, slots=True)
class TrainConfig:
    hidden: int = 16
    members: int = 10
    epochs: int = 400
    learning_rate: float = 3e-3
    weight_decay: float = 1e-3
    huber_delta: float = 0.1
    correction_penalty: float = 0.03  # x mean squared log-correction per phase
    eval_every: int = 5
    patience: int = 20  # evaluations without improvement
    validation_share: float = 0.15
    model_balance: float = 0.0  # row weight x (rows of its model)^-model_balance, mean 1
    seed: int = 20261122
    progress: bool = True
    served_target: bool = False  # learn target_j (served quote = measured), not measured_j
    time_weight: float = 0.0  # > 0: a time-per-output-token head, its Huber loss x this
    serving_rows: bool = False  # also train on aiconfigurator's serving runs (TPOT only)
    serving_weight: float = 1.0  # x the weight of a row without an energy target (serving run)


@dataclass
class TrainedModel:
    """An ensemble with the normalisation and variant it was trained under."""

    gnn: EnergyGNN
    normalisation: Normalisation
    variant: Variant
    best_epochs: list[int]
    log: list[dict[str, float]] = field(default_factory=list)

    def serving(self) -> ServingModel:
        return ServingModel(self.gnn).eval()


def variant_features(rows: Sequence[TrainingRow], variant: Variant) -> list[RequestFeatures]:
    return [r.features if variant.phase_split else r.merged for r in rows]


def feature_masks(variant: Variant, node_dim: int) -> tuple[FloatArray, FloatArray]:
    """1 for the features a variant sees, 0 for those it is denied (no-roofline ablation; the
    precision bits when `precision_bits` is off)."""
    phases = (node_dim - len(NODE_STATIC_FEATURES)) // len(NODE_PHASE_FEATURES)
    names = [*NODE_STATIC_FEATURES, *(list(NODE_PHASE_FEATURES) * phases)]
    node = np.array([variant.roofline or n not in ROOFLINE_NODE_FEATURES for n in names], float)
    denied = set() if variant.roofline else set(ROOFLINE_GLOBAL_FEATURES)
    if not variant.precision_bits:
        denied |= set(GLOBAL_FEATURE_GROUPS["precision"])
    glob = np.array([n not in denied for n in GLOBAL_FEATURES])
    return node, glob.astype(float)


def tensors(
    rows: Sequence[TrainingRow], norm: Normalisation, variant: Variant
) -> dict[str, torch.Tensor]:
    """Model inputs of `rows` under `variant`, as torch tensors."""
    inputs = request_inputs(variant_features(rows, variant), norm)
    node_keep, global_keep = feature_masks(variant, inputs["node_x"].shape[-1] // 2)
    inputs["node_x"] = inputs["node_x"] * np.tile(node_keep, 2).astype(np.float32)
    inputs["global_x"] = inputs["global_x"] * global_keep.astype(np.float32)
    return {k: torch.from_numpy(v) for k, v in inputs.items()}


def split_validation(
    rows: Sequence[TrainingRow], share: float, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Mask of rows whose whole model is held out for early stopping (about `share` of rows)."""
    models = sorted({r.model_id for r in rows})
    rng.shuffle(models)
    held: set[str] = set()
    count = 0
    for model in models:
        if count >= share * len(rows):
            break
        held.add(model)
        count += sum(r.model_id == model for r in rows)
    return np.array([r.model_id in held for r in rows])


def balanced_weights(
    rows: Sequence[TrainingRow], weights: FloatArray, exponent: float
) -> FloatArray:
    """`weights` x (rows of the row's model, same GPU)^-exponent, rescaled to mean 1: with
    exponent 1 every measured model-GPU series weighs the same in total, so one model with many
    rows (or one anomalous model) does not dominate the corrections learned for the others."""
    if exponent == 0.0:
        return weights
    keys = [(r.source, r.model_id, r.gpu_id) for r in rows]
    counts = {k: keys.count(k) for k in set(keys)}
    scaled = weights * np.array([counts[k] ** -exponent for k in keys])
    return np.asarray(scaled / scaled.mean(), dtype=np.float64)


def time_only_weighted(
    rows: Sequence[TrainingRow], weights: FloatArray, factor: float
) -> FloatArray:
    """`weights` with the rows that have no measured energy (serving runs, trained on their
    TPOT alone) times `factor`: how much the time-only rows count against the energy rows."""
    time_only = np.array([not np.isfinite(r.measured_j) for r in rows])
    return np.asarray(np.where(time_only, weights * factor, weights), dtype=np.float64)


def train_ensemble(
    rows: Sequence[TrainingRow],
    weights: FloatArray,
    variant: Variant,
    config: TrainConfig,
    desc: str = "train",
) -> TrainedModel:
    """Fit an ensemble on `rows` (row weights `weights`, mean 1).

    Each member trains on its own bootstrap (Poisson) copy of the rows minus a few whole models,
    on which it is early-stopped (its best epoch is kept): bagging, with out-of-bag stopping.
    """
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    weights = balanced_weights(rows, weights, config.model_balance)
    weights = time_only_weighted(rows, weights, config.serving_weight)
    held = np.stack(
        [split_validation(rows, config.validation_share, rng) for _ in range(config.members)], 1
    ).astype(np.float32)
    boot = rng.poisson(1.0, size=held.shape).astype(np.float32)
    w_train = torch.from_numpy(boot * weights[:, None].astype(np.float32) * (1.0 - held))
    w_val = torch.from_numpy(weights[:, None].astype(np.float32) * held)
    norm = Normalisation.fit(variant_features(rows, variant))
    x = tensors(rows, norm, variant)
    target = np.log([r.target_j if config.served_target else r.measured_j for r in rows])
    has_energy = torch.tensor(np.isfinite(target), dtype=torch.float32)[:, None]
    log_y = torch.tensor(np.nan_to_num(target), dtype=torch.float32)[:, None]
    tpot_ratio = log_tpot_ratio(list(rows))
    has_tpot = torch.tensor(np.isfinite(tpot_ratio), dtype=torch.float32)[:, None]
    log_tpot = torch.tensor(np.nan_to_num(tpot_ratio), dtype=torch.float32)[:, None]
    targets = Targets(log_y, has_energy, log_tpot, has_tpot)
    energy_outputs = x["log_analytical_j"].shape[-1]
    gnn = EnergyGNN(
        ModelConfig(
            node_dim=x["node_x"].shape[-1] // 2,
            global_dim=x["global_x"].shape[-1],
            outputs=energy_outputs,
            time_outputs=1 if config.time_weight > 0 else 0,
            hidden=config.hidden,
            members=config.members,
            message_passing=variant.message_passing,
            direct=variant.direct,
            direct_offset=float(log_y[has_energy > 0].mean()),
        )
    )
    optimiser = torch.optim.AdamW(
        gnn.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )
    loss_fn = torch.nn.HuberLoss(reduction="none", delta=config.huber_delta)
    best = {k: v.detach().clone() for k, v in gnn.state_dict().items()}
    best_loss = torch.full((config.members,), float("inf"))
    best_epoch = [0] * config.members
    stale = torch.zeros(config.members, dtype=torch.long)  # evaluations without improvement
    log: list[dict[str, float]] = []
    bar = tqdm(range(config.epochs + 1), desc=desc, unit="epoch", disable=not config.progress)
    for epoch in bar:
        optimiser.zero_grad()
        out = gnn(**x)  # [R, K, O + T]
        log_phase, time = out[..., :energy_outputs], out[..., energy_outputs:]
        error = row_errors(log_phase, time, targets, loss_fn, config.time_weight)  # [R, K]
        loss = (error * w_train).sum(0) / w_train.sum(0).clamp(min=1e-9)
        if not variant.direct:  # ridge towards the analytical model: the data move it only
            # where they inform (prefill is a few % of these requests' energy)
            squared = ((log_phase - x["log_analytical_j"].unsqueeze(1)) ** 2).sum(-1)
            squared = squared + (time**2).sum(-1)
            penalty = (squared * w_train).sum(0) / w_train.sum(0).clamp(min=1e-9)
            loss = loss + config.correction_penalty * penalty
        if epoch % config.eval_every == 0:  # the parameters before this step
            val_loss = _validation_loss(error.detach(), w_val, loss.detach())
            improved = val_loss < best_loss
            stale = torch.where(improved, 0, stale + 1)
            best_loss = torch.where(improved, val_loss, best_loss)
            _copy_members(best, gnn.state_dict(), improved)
            flags = improved.tolist()
            best_epoch = [epoch if i else b for i, b in zip(flags, best_epoch, strict=True)]
            entry = {
                "epoch": epoch,
                "train": float(loss.detach().mean()),
                "validation": float(val_loss.mean()),
            }
            log.append(entry)
            bar.set_postfix(train=f"{entry['train']:.4f}", val=f"{entry['validation']:.4f}")
            if bool((stale >= config.patience).all()):
                break
        loss.sum().backward()  # type: ignore[no-untyped-call]  # (untyped in torch)
        optimiser.step()
    gnn.load_state_dict(best)
    _zero_denied_inputs(gnn, variant, x["node_x"].shape[-1] // 2)
    gnn.eval()
    logger.info("%s: best epochs %s", desc, best_epoch)
    return TrainedModel(gnn, norm, variant, best_epoch, log)


@dataclass(frozen=True, slots=True)
class Targets:
    """What each row [R, 1] is trained towards: log target energy [log J] and log(measured /
    served TPOT), each with a mask (1 where the row has it: a serving run has no energy, a
    request without a decode step no TPOT; a masked target holds 0)."""

    log_j: torch.Tensor
    has_energy: torch.Tensor
    log_tpot_ratio: torch.Tensor
    has_tpot: torch.Tensor


def row_errors(
    log_phase: torch.Tensor,
    time: torch.Tensor,
    targets: Targets,
    loss_fn: torch.nn.HuberLoss,
    time_weight: float,
) -> torch.Tensor:
    """Each row's loss per member [R, K]: the Huber error of its log request energy where it
    has an energy target, plus `time_weight` x that of its TPOT correction where it has a TPOT
    target (none without a time head, `time_weight` 0)."""
    members = log_phase.shape[1]
    energy: torch.Tensor = loss_fn(log_request_j(log_phase), targets.log_j.expand(-1, members))
    error = energy * targets.has_energy
    if time_weight > 0:
        time_error: torch.Tensor = loss_fn(time[..., 0], targets.log_tpot_ratio.expand(-1, members))
        error = error + time_weight * time_error * targets.has_tpot
    return error


def _zero_denied_inputs(gnn: EnergyGNN, variant: Variant, node_dim: int) -> None:
    """Zero the first-layer weights of the inputs `variant` is denied: it trained on them
    masked to 0, so its outputs are unchanged, and served unmasked (ONNX) they count for
    nothing."""
    node_keep, global_keep = feature_masks(variant, node_dim)
    with torch.no_grad():
        if gnn.config.message_passing:
            node_keep = np.tile(node_keep, 2)
        gnn.sage1[:, torch.from_numpy(node_keep == 0)] = 0.0
        gnn.global1[:, torch.from_numpy(global_keep == 0)] = 0.0


def _validation_loss(
    error: torch.Tensor, w_val: torch.Tensor, train_loss: torch.Tensor
) -> torch.Tensor:
    """Per-member weighted loss on its held-out models (its training loss if it has none)."""
    total = w_val.sum(0)
    held_out = (error * w_val).sum(0) / total.clamp(min=1e-9)
    return torch.where(total > 0, held_out, train_loss)


def _copy_members(
    best: dict[str, torch.Tensor], current: dict[str, torch.Tensor], members: torch.Tensor
) -> None:
    """Copy the improved members' slices (leading axis) of every parameter into `best`."""
    for name, value in current.items():
        best[name][members] = value.detach()[members]


def predict_log_j(model: TrainedModel, rows: Sequence[TrainingRow]) -> FloatArray:
    """The ensemble's log request energy [log J] for `rows`."""
    x = tensors(rows, model.normalisation, model.variant)
    with torch.no_grad():
        log_j = model.serving()(**x)[0]
    return np.asarray(log_j.numpy(), dtype=np.float64)


def predict_log_tpot_ratio(model: TrainedModel, rows: Sequence[TrainingRow]) -> FloatArray:
    """The ensemble's log-correction of the served time per output token (0 without a time
    head)."""
    if model.gnn.config.time_outputs == 0:
        return np.zeros(len(rows))
    x = tensors(rows, model.normalisation, model.variant)
    with torch.no_grad():
        out = model.gnn(**x)[..., model.gnn.config.outputs]
    return np.asarray(out.mean(dim=1).numpy(), dtype=np.float64)
