"""DeepSeek sparse attention (DSA, DeepSeek-V3.2): the lightning indexer's counts.

Shapes from DeepSeek-V3.2-Exp's config.json
(https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json): index_n_heads 64,
index_head_dim 128, index_topk 2048. As vLLM runs it (vllm/model_executor/models/deepseek_v2.py,
`Indexer`; vllm/v1/attention/backends/mla/indexer.py):
- the indexer is replicated, not tensor-parallel (wq_b, wk, weights_proj are ReplicatedLinear):
  every GPU scores every key with all heads; its projections are part of the qkv GEMM
  (service.core.counts);
- it runs as kernels of its own (service.core.graph.INDEXER_STEPS), each a launch: the
  LayerNorm of the index key (7 ops per element), RoPE on the first qk_rope_head_dim dims of
  its query heads and key (3 ops per element, fp32 cos/sin), the fp8 quantisation of q (one
  fp32 scale per head) and of k, written with its scale to the indexer cache, with the head
  weights scaled (3 ops per element quantised, 1 per weight); then the logits and the top-k;
- every query scores every cached key: logits = sum over heads of w_h ReLU(q_h . k), an fp8
  MQA GEMM (2 x heads x head_dim FLOP per pair, priced at the deployment's GEMM rate), then
  ReLU, weight and head sum (3 ops per head and pair); the fp32 logits are written and read
  once by the top-k selection (2 ops per logit), which writes `index_topk` int32 indices per
  query;
- the MLA attention then reads only the selected keys, in both phases absorbed over the latent
  (vLLM's FlashMLA sparse kernels), over all `index_topk` slots of each query on padded heads
  (service.core.counts.sparse_kernel_heads); it reads only the keys selected.
"""

from __future__ import annotations

from service.core.architecture import ModelArchitecture
from service.core.counts import PassShape
from service.core.graph import KernelNode
from service.core.shards import ShardShapes
from service.core.work import Work

_FP8_BYTES, _FP32_BYTES, _INDEX_BYTES = 1.0, 4.0, 4.0
_HEAD_OPS_PER_PAIR = 3.0  # ReLU, weight, head sum
_TOPK_OPS_PER_LOGIT = 2.0
_LAYERNORM_OPS, _ROPE_OPS, _QUANT_OPS = 7.0, 3.0, 3.0


def _pairs_keys_new(arch: ModelArchitecture, p: PassShape) -> tuple[float, float, float]:
    """Query-key pairs scored, cached keys read and new keys written over the pass: full
    attention's spans (the prefilling sequences' causal pairs, the decoding ones' context)."""
    spans = [p.spans[v] for v in ("full", "decode") if v in p.spans]
    return (
        p.sequences * sum(span.pairs for span in spans),
        p.sequences * sum(span.keys_read for span in spans),
        p.sequences * sum(span.new_tokens for span in spans),
    )


def indexer_work(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Counts of the indexer kernel `node` (an operand of service.core.graph.INDEXER_STEPS)."""
    assert arch.dsa is not None
    heads, dim, topk = arch.dsa.index_n_heads, arch.dsa.index_head_dim, arch.dsa.index_topk
    tokens, ab = p.tokens, s.activation_bytes
    pairs, keys, new = _pairs_keys_new(arch, p)
    if node.operand == "indexer_norm":
        return Work(
            cuda_core_ops=_LAYERNORM_OPS * tokens * dim,
            special_function_ops=tokens,
            weight_bytes=2.0 * dim * s.embedding_bytes,
            activation_read_bytes=tokens * dim * ab,
            activation_write_bytes=tokens * dim * ab,
        )
    if node.operand == "indexer_rope":
        rotary = arch.mla.qk_rope_head_dim if arch.mla else dim
        elements = tokens * (heads + 1) * rotary
        return Work(
            cuda_core_ops=_ROPE_OPS * elements,
            activation_read_bytes=elements * ab + tokens * rotary * _FP32_BYTES,
            activation_write_bytes=elements * ab,
        )
    if node.operand == "indexer_quant":
        quantised = tokens * (heads + 1) * dim
        return Work(
            cuda_core_ops=_QUANT_OPS * quantised + tokens * heads,
            activation_read_bytes=quantised * ab + tokens * heads * _FP32_BYTES,
            activation_write_bytes=tokens * heads * (dim * _FP8_BYTES + 2 * _FP32_BYTES),
            kv_cache_write_bytes=new * arch.dsa.key_bytes,
        )
    if node.operand == "indexer_topk":
        return Work(
            cuda_core_ops=_TOPK_OPS_PER_LOGIT * pairs,
            activation_read_bytes=pairs * _FP32_BYTES,
            activation_write_bytes=tokens * topk * _INDEX_BYTES,
        )
    return Work(  # the logits: every query against every key it may attend
        tensor_flops=2.0 * heads * dim * pairs,
        padded_tensor_flops=2.0 * heads * dim * pairs,
        cuda_core_ops=_HEAD_OPS_PER_PAIR * heads * pairs,
        activation_read_bytes=tokens * heads * (dim * _FP8_BYTES + 2 * _FP32_BYTES),
        activation_write_bytes=pairs * _FP32_BYTES,
        kv_cache_read_bytes=keys * arch.dsa.key_bytes,
    )
