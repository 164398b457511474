"""The GraphSAGE energy regressor in torch, as an ensemble of K independent members evaluated in
one pass (each weight tensor has a leading member axis, so K members cost one set of ops).

Per member: two GraphSAGE layers with mean aggregation (h' = relu([h, A h] W + b), A the
row-normalised adjacency; the first layer's A x depends on the inputs only, so the encoder
computes it and node_x carries [x, A x]), a mean readout over real nodes joined by the global
features through one linear layer, then two linear layers to one output per phase. The output
is a log-correction of the analytical phase energy (or, in the "direct" ablation, the log
energy itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True, slots=True)
class ModelConfig:
    node_dim: int  # features per node (node_x carries them twice: own, then neighbours' mean)
    global_dim: int
    outputs: int = 2  # log phase energies (prefill, decode)
    time_outputs: int = 0  # extra heads: log-corrections of the served time per output token
    hidden: int = 16
    members: int = 5
    message_passing: bool = True
    direct: bool = False
    direct_offset: float = 0.0


def _weight(members: int, fan_in: int, fan_out: int, gain: float = 1.0) -> nn.Parameter:
    """[members, fan_in, fan_out], He-initialised (times `gain`)."""
    return nn.Parameter(torch.randn(members, fan_in, fan_out) * gain * math.sqrt(2.0 / fan_in))


def _shared_input_product(x: Tensor, weight: Tensor) -> Tensor:
    """An input all members share [B, 1, N, I] times each member's weight [K, I, O]
    -> [B, K, N, O].

    torch trains fastest with einsum (one GEMM over all members); onnxruntime runs a
    broadcast MatMul several times faster than Einsum, so the export traces that instead (same
    arithmetic; the export check compares the two).
    """
    if torch.onnx.is_in_onnx_export():
        return x @ weight
    return torch.einsum("bni,kio->bkno", x.squeeze(1), weight)


def _member_product(h: Tensor, weight: Tensor) -> Tensor:
    """Each member's states [B, K, N, I] times its own weight [K, I, O] -> [B, K, N, O]."""
    if torch.onnx.is_in_onnx_export():
        return h @ weight
    return torch.einsum("bkni,kio->bkno", h, weight)


def _bias(members: int, width: int) -> nn.Parameter:
    """[members, 1, width]: broadcasts over the node axis of [B, K, N, width]."""
    return nn.Parameter(torch.zeros(members, 1, width))


class EnergyGNN(nn.Module):
    """Inputs as `service.pricing.regressor.encoding.model_inputs`; returns log phase energy
    [B, K, O].

    Hidden states are laid out [B, K, N, H] (member axis second; inputs carry it with length 1);
    graph-level states keep a node axis of length 1, so every layer is one batched product.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        k, h = config.members, config.hidden
        self.config = config
        sage_in = 2 * config.node_dim if config.message_passing else config.node_dim
        sage_hidden = 2 * h if config.message_passing else h
        # Every parameter has the member axis first (early stopping keeps members apart).
        self.sage1 = _weight(k, sage_in, h)
        self.bias1 = _bias(k, h)
        self.sage2 = _weight(k, sage_hidden, h)
        self.bias2 = _bias(k, h)
        self.global1 = _weight(k, config.global_dim, h)
        self.global_bias = _bias(k, h)
        self.head1 = _weight(k, 2 * h, h)
        self.head_bias1 = _bias(k, h)
        width = config.outputs + config.time_outputs
        self.head2 = _weight(k, h, width, gain=0.05)
        self.head_bias2 = _bias(k, width)

    def corrections(
        self,
        node_x: Tensor,
        adjacency: Tensor,
        readout_weight: Tensor,
        global_x: Tensor,
    ) -> Tensor:
        """Each member's output per phase [B, K, 1, O + T] (T time heads after the O energy
        ones)."""
        x = node_x  # [x, mean of neighbours' x]: layer 1's aggregation is done by the encoder
        if not self.config.message_passing:
            x = x[..., : self.config.node_dim]
        h = torch.relu(_shared_input_product(x, self.sage1) + self.bias1)  # [B, K, N, H]
        if self.config.message_passing:
            h = torch.cat([h, adjacency @ h], dim=-1)
        h = torch.relu(_member_product(h, self.sage2) + self.bias2)
        mean = readout_weight @ h  # [B, 1, 1, N] @ [B, K, N, H] -> [B, K, 1, H]
        g = torch.relu(_global_product(global_x, self.global1) + self.global_bias)
        z = torch.cat([mean, g], dim=-1)  # readout and global features [B, K, 1, 2H]
        z = torch.relu(_member_product(z, self.head1) + self.head_bias1)
        return _member_product(z, self.head2) + self.head_bias2

    def forward(
        self,
        node_x: Tensor,
        adjacency: Tensor,
        readout_weight: Tensor,
        global_x: Tensor,
        log_analytical_j: Tensor,
    ) -> Tensor:
        """[B, K, O + T]: log phase energy, then the time log-corrections."""
        out = self.corrections(node_x, adjacency, readout_weight, global_x).squeeze(2)
        energy, time = out[..., : self.config.outputs], out[..., self.config.outputs :]
        if self.config.direct:
            return torch.cat([energy + self.config.direct_offset, time], dim=-1)
        return torch.cat([log_analytical_j.unsqueeze(1) + energy, time], dim=-1)


def _global_product(global_x: Tensor, weight: Tensor) -> Tensor:
    """Global features [B, 1, 1, G] times each member's [K, G, H] -> [B, K, 1, H]."""
    if torch.onnx.is_in_onnx_export():
        return global_x @ weight
    return torch.einsum("bg,kgh->bkh", global_x[:, 0, 0], weight).unsqueeze(2)


def log_request_j(log_phase_j: Tensor) -> Tensor:
    """log(sum over phases of exp(log phase energy)) on the last axis."""
    return torch.logsumexp(log_phase_j, dim=-1)


class ServingModel(nn.Module):
    """The ensemble's mean log phase energy and the request's log energy (what ONNX exports),
    then, with a time head, the members' mean log-correction of the time per output token
    [B, 1]."""

    def __init__(self, gnn: EnergyGNN) -> None:
        super().__init__()
        self.gnn = gnn

    def forward(
        self,
        node_x: Tensor,
        adjacency: Tensor,
        readout_weight: Tensor,
        global_x: Tensor,
        log_analytical_j: Tensor,
    ) -> tuple[Tensor, ...]:
        out = self.gnn.corrections(node_x, adjacency, readout_weight, global_x)
        mean = out.mean(dim=(1, 2))  # members' mean [B, O + T]
        correction = mean[:, : self.gnn.config.outputs]
        if self.gnn.config.direct:
            log_phase = correction + self.gnn.config.direct_offset
        else:
            log_phase = log_analytical_j + correction
        if self.gnn.config.time_outputs == 0:
            return log_request_j(log_phase), log_phase
        return log_request_j(log_phase), log_phase, mean[:, self.gnn.config.outputs :]
