"""The configuration's architecture in plain torch, random weights, prefill and decode.

Built from the catalogue's shapes (no download, no transformers config): token embedding,
`num_layers` decoder layers (RMSNorm, grouped-query attention through
``scaled_dot_product_attention`` with a preallocated KV cache, sliding-window layers attending
only to their last `sliding_window_tokens` keys, gated or plain MLP, or a top-k routed MoE of
such experts run expert by expert as Hugging Face transformers' eager MoE blocks do), a final
norm and the LM head applied to the last position only, as serving engines do. Rotary
embeddings and biases are left out (well under 1 % of the FLOPs and bytes). This is what the
``hf-transformers`` engine profile prices: eager PyTorch, no CUDA graphs, a static batch.

On several devices the layers are split into contiguous blocks, one per device, the way
transformers' ``device_map="auto"`` places them: pipeline stages run one after another
(``parallelism.pipeline`` = the device count, never tensor parallelism). torch is imported
when a workload is built, never by the service.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from service.core.architecture import ModelArchitecture


@dataclass(frozen=True, slots=True)
class PhaseRunners:
    """Callables that run one phase each on the device, and one that waits for it."""

    prefill: Callable[[], None]
    decode: Callable[[], None]
    together: Callable[[], None]
    synchronize: Callable[[], None]
    release: Callable[[], None]


def build_runners(
    arch: ModelArchitecture,
    batch_size: int,
    prompt_tokens: int,
    output_tokens: int,
    *,
    devices: Sequence[str] = ("cuda:0",),
    dtype_name: str = "bfloat16",
    seed: int = 0,
) -> PhaseRunners:
    """Random-weight model of `arch` on `devices` (layers split into contiguous blocks, see
    the module doc) and the runners of its phases for one static batch."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torch import nn

    torch.manual_seed(seed)
    dtype = getattr(torch, dtype_name)
    h, heads, kv_heads, d = (
        arch.hidden_size,
        arch.num_attention_heads,
        arch.num_key_value_heads,
        arch.head_dim,
    )
    gated = arch.mlp == "gated"
    act: Callable[[Any], Any] = getattr(F, arch.activation)  # silu, gelu or relu
    max_len = prompt_tokens + output_tokens
    window = arch.sliding_window_tokens if arch.num_sliding_window_layers else None
    device = devices[0]  # where each module is built; set per layer below

    def new(*shape: int) -> Any:
        return torch.randn(*shape, device=device, dtype=dtype) * 0.02

    class Mlp(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.up = nn.Parameter(new(h, width))
            self.gate = nn.Parameter(new(h, width)) if gated else None
            self.down = nn.Parameter(new(width, h))

        def forward(self, x: Any) -> Any:
            inner = (
                act(x @ self.gate) * (x @ self.up) if self.gate is not None else act(x @ self.up)
            )
            return inner @ self.down

    class Moe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = arch.moe_intermediate_size or arch.intermediate_size
            self.router = nn.Parameter(new(h, arch.num_experts))
            self.experts = nn.ModuleList(Mlp(width) for _ in range(arch.num_experts))

        def forward(self, x: Any) -> Any:
            flat = x.reshape(-1, h)
            weights, chosen = torch.topk(
                torch.softmax(flat @ self.router, -1), arch.experts_per_token
            )
            out = torch.zeros_like(flat)
            # Only the experts some token chose, found with one host sync, as transformers'
            # eager MoE blocks loop over `expert_hit`.
            for e in torch.unique(chosen).tolist():
                rows, slot = torch.nonzero(chosen == e, as_tuple=True)
                out.index_add_(0, rows, self.experts[e](flat[rows]) * weights[rows, slot, None])
            return out.reshape(x.shape)

    class Layer(nn.Module):
        def __init__(self, sliding: bool) -> None:
            super().__init__()
            self.device = device
            self.window = window if sliding else None
            self.norm1 = nn.RMSNorm(h, device=device, dtype=dtype)
            self.norm2 = nn.RMSNorm(h, device=device, dtype=dtype)
            self.qkv = nn.Parameter(new(h, (heads + 2 * kv_heads) * d))
            self.out = nn.Parameter(new(heads * d, h))
            self.mlp = Moe() if arch.num_experts else Mlp(arch.intermediate_size)
            self.k = torch.zeros(batch_size, kv_heads, max_len, d, device=device, dtype=dtype)
            self.v = torch.zeros_like(self.k)

        def forward(self, x: Any, start: int) -> Any:
            b, t, _ = x.shape
            q, k, v = (self.norm1(x) @ self.qkv).split([heads * d, kv_heads * d, kv_heads * d], -1)
            q = q.view(b, t, heads, d).transpose(1, 2)
            self.k[:, :, start : start + t] = k.view(b, t, kv_heads, d).transpose(1, 2)
            self.v[:, :, start : start + t] = v.view(b, t, kv_heads, d).transpose(1, 2)
            first = first_key(start, t, self.window)
            mask = None
            if self.window is not None and t > 1:
                mask = band_mask(t, start + t - first, self.window, self.device)
            attn = F.scaled_dot_product_attention(
                q,
                self.k[:, :, first : start + t],
                self.v[:, :, first : start + t],
                attn_mask=mask,
                is_causal=t > 1 and mask is None,
                enable_gqa=heads != kv_heads,
            )
            x = x + attn.transpose(1, 2).reshape(b, t, heads * d) @ self.out
            return x + self.mlp(self.norm2(x))

    embed = new(arch.vocab_size, h)
    layers = []
    for i in range(arch.num_layers):
        device = devices[stage_of_layer(i, arch.num_layers, len(devices))]
        layers.append(Layer(is_sliding_layer(i, arch.num_layers, arch.num_sliding_window_layers)))
    device = devices[-1]
    head = embed.T.to(device) if arch.tie_word_embeddings else new(h, arch.vocab_size)
    final_norm = nn.RMSNorm(h, device=device, dtype=dtype)
    prompt = torch.randint(0, arch.vocab_size, (batch_size, prompt_tokens), device=devices[0])

    def step(tokens: Any, start: int) -> Any:
        x = embed[tokens.to(devices[0])]
        for layer in layers:
            x = layer(x.to(layer.device), start)
        return torch.argmax(final_norm(x[:, -1].to(device)) @ head, -1, keepdim=True)

    @torch.inference_mode()
    def prefill() -> None:
        step(prompt, 0)

    @torch.inference_mode()
    def decode() -> None:  # the cache holds the prompt (prefilled once when built)
        # The prefill yields the first output token; `output_tokens - 1` steps yield the rest
        # (as transformers' generate and the cost model's `decode_steps` count them).
        token = prompt[:, -1:]
        for i in range(output_tokens - 1):
            token = step(token, prompt_tokens + i)

    def together() -> None:
        prefill()
        decode()

    def synchronize() -> None:
        for on in devices:
            if on.startswith("cuda"):
                torch.cuda.synchronize(on)

    def release() -> None:
        layers.clear()
        if any(on.startswith("cuda") for on in devices):
            torch.cuda.empty_cache()

    prefill()
    return PhaseRunners(prefill, decode, together, synchronize, release)


def is_sliding_layer(index: int, layers: int, sliding: int) -> bool:
    """Whether layer `index` of `layers` is one of the `sliding` window layers, spread evenly
    (Gemma 3: five local layers to one global; the count, not the order, sets the cost)."""
    return (index + 1) * sliding // layers > index * sliding // layers


def stage_of_layer(index: int, layers: int, stages: int) -> int:
    """The device (pipeline stage) of layer `index`: contiguous blocks, the earlier stages
    one layer longer when `layers` does not divide evenly."""
    return index * stages // layers


def band_mask(queries: int, keys: int, width: int, device: str = "cpu") -> Any:
    """Attention mask of a sliding window of `width` keys: the queries are the last `queries`
    of `keys` positions, and query i sees key j when i - width < j <= i (True: attend)."""
    import torch

    q_pos = torch.arange(keys - queries, keys, device=device)[:, None]
    k_pos = torch.arange(keys, device=device)[None, :]
    return (k_pos <= q_pos) & (k_pos > q_pos - width)


def first_key(start: int, new: int, window: int | None) -> int:
    """The first cached position any of `new` queries at `start`.. attends: 0 without a
    window; else the earliest query's window start, start - window + 1 (at least 0)."""
    return 0 if window is None else max(0, start - window + 1)
