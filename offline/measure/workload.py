"""The configuration's architecture in plain torch, random weights, prefill and decode.

Built from the catalogue's shapes (no download, no transformers config): token embedding,
`num_layers` decoder layers (RMSNorm, grouped-query attention through
``scaled_dot_product_attention`` with a preallocated KV cache, gated or plain MLP, or a
top-k routed MoE of such experts), a final norm and the LM head applied to the last position
only, as serving engines do. Rotary embeddings and biases are left out (well under 1 % of the
FLOPs and bytes). torch is imported when a workload is built, never by the service.
"""

from __future__ import annotations

from collections.abc import Callable
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
    device: str = "cuda",
    dtype_name: str = "bfloat16",
    seed: int = 0,
) -> PhaseRunners:
    """Random-weight model of `arch` and the runners of its phases for one static batch."""
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
    new: Callable[..., Any] = lambda *shape: (  # noqa: E731
        torch.randn(*shape, device=device, dtype=dtype) * 0.02
    )

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
            for e, expert in enumerate(self.experts):
                rows, slot = torch.nonzero(chosen == e, as_tuple=True)
                if rows.numel():
                    out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
            return out.reshape(x.shape)

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
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
            attn = F.scaled_dot_product_attention(
                q,
                self.k[:, :, : start + t],
                self.v[:, :, : start + t],
                is_causal=t > 1,
                enable_gqa=heads != kv_heads,
            )
            x = x + attn.transpose(1, 2).reshape(b, t, heads * d) @ self.out
            return x + self.mlp(self.norm2(x))

    embed = new(arch.vocab_size, h)
    head = embed.T if arch.tie_word_embeddings else new(h, arch.vocab_size)
    layers = [Layer() for _ in range(arch.num_layers)]
    final_norm = nn.RMSNorm(h, device=device, dtype=dtype)
    prompt = torch.randint(0, arch.vocab_size, (batch_size, prompt_tokens), device=device)

    def step(tokens: Any, start: int) -> Any:
        x = embed[tokens]
        for layer in layers:
            x = layer(x, start)
        return torch.argmax(final_norm(x[:, -1]) @ head, -1, keepdim=True)

    @torch.inference_mode()
    def prefill() -> None:
        step(prompt, 0)

    @torch.inference_mode()
    def decode() -> None:  # the cache holds the prompt (prefilled once when built)
        token = prompt[:, -1:]
        for i in range(output_tokens):
            token = step(token, prompt_tokens + i)

    def together() -> None:
        prefill()
        decode()

    def synchronize() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def release() -> None:
        layers.clear()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()

    prefill()
    return PhaseRunners(prefill, decode, together, synchronize, release)
