"""Cross-attention layers a text-only request skips (Llama 3.2 Vision): weights on the GPU, no
work, no KV cache. Against the same decoder without them, worked out by hand."""

from __future__ import annotations

from dataclasses import replace

from core_support import catalog_arch, catalog_gpu, column_sum, deployment, estimate
from numpy.testing import assert_allclose

from service.core.memory import kv_cache_bytes_per_gpu, weight_bytes_per_gpu
from service.core.shards import shard_shapes
from service.core.workload import Workload

ELEVEN_B = "meta-llama/Llama-3.2-11B-Vision"
# One layer of either kind: q and o 4096 x 4096, k and v 4096 x 1024, a gated 14336 MLP.
LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336


def test_the_same_work_as_the_decoder_without_them() -> None:
    arch = catalog_arch(ELEVEN_B)
    assert (arch.num_layers, arch.num_cross_attention_layers) == (32, 8)
    text_only = replace(arch, num_cross_attention_layers=0)
    layout = deployment(catalog_gpu("H200-SXM-141GB"))
    with_cross, without = (estimate(a, 2, 700, 50, layout) for a in (arch, text_only))
    for field in ("tensor_flops", "weight_bytes", "activation_read_bytes"):
        for phase in ("prefill", "decode"):
            assert column_sum(getattr(with_cross, phase), field) == column_sum(
                getattr(without, phase), field
            ), (field, phase)


def test_eight_layers_more_of_weights_and_no_more_kv_cache() -> None:
    """8 x LAYER bf16 elements more on the GPU; the KV cache of the 32 self-attention layers
    only (2 x 8 KV heads x 128 x 2 B per token and layer)."""
    arch = catalog_arch(ELEVEN_B)
    text_only = replace(arch, num_cross_attention_layers=0)
    shapes = shard_shapes(arch, deployment(catalog_gpu("H200-SXM-141GB")))
    extra = weight_bytes_per_gpu(arch, shapes, 1) - weight_bytes_per_gpu(text_only, shapes, 1)
    assert_allclose(extra, 8 * LAYER * 2.0)
    # one sequence of 1000 + 24 tokens: 32 layers x 1024 tokens x 2048 elements x 2 B
    kv = kv_cache_bytes_per_gpu(arch, shapes, Workload(1, 1000, 24), 1)
    assert_allclose(kv, 32 * 1024 * 2048 * 2.0)
