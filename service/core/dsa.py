"""DeepSeek sparse attention (DSA, DeepSeek-V3.2): the lightning indexer's counts.

Shapes from DeepSeek-V3.2-Exp's config.json
(https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json): index_n_heads 64,
index_head_dim 128, index_topk 2048. As vLLM runs it (vllm/model_executor/models/deepseek_v2.py,
`Indexer`; vllm/v1/attention/backends/mla/indexer.py):
- the indexer is replicated, not tensor-parallel (wq_b, wk, weights_proj are ReplicatedLinear):
  every GPU scores every key with all heads; its projections are part of the qkv GEMM
  (service.core.counts);
- each token's index key (index_head_dim fp8 values + one fp32 scale) goes to an indexer cache;
- every query scores every cached key: logits = sum over heads of w_h ReLU(q_h . k), an fp8
  MQA GEMM (2 x heads x head_dim FLOP per pair, priced at the deployment's GEMM rate), then
  ReLU, weight and head sum (3 ops per head and pair); the fp32 logits are written and read
  once by the top-k selection (2 ops per logit), which writes `index_topk` int32 indices per
  query;
- the MLA attention then reads only the selected keys, in both phases absorbed over the latent
  (vLLM's FlashMLA sparse kernels): priced as a window of `index_topk` keys
  (ModelArchitecture.capped_window), pairs and keys read alike.
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


def indexer_work(node: KernelNode, arch: ModelArchitecture, s: ShardShapes, p: PassShape) -> Work:
    """Scores of every query against every key it may attend (full attention's spans: the
    prefilling sequences' causal pairs, the decoding ones' whole context), and the top-k."""
    assert arch.dsa is not None
    heads, dim, topk = arch.dsa.index_n_heads, arch.dsa.index_head_dim, arch.dsa.index_topk
    spans = [p.spans[v] for v in ("full", "decode") if v in p.spans]
    pairs = p.sequences * sum(span.pairs for span in spans)
    keys = p.sequences * sum(span.keys_read for span in spans)
    new = p.sequences * sum(span.new_tokens for span in spans)
    key_bytes = arch.dsa.key_bytes
    return Work(
        tensor_flops=2.0 * heads * dim * pairs,
        padded_tensor_flops=2.0 * heads * dim * pairs,
        cuda_core_ops=(_HEAD_OPS_PER_PAIR * heads + _TOPK_OPS_PER_LOGIT) * pairs,
        activation_read_bytes=p.tokens * heads * (dim * _FP8_BYTES + _FP32_BYTES)
        + pairs * _FP32_BYTES,
        activation_write_bytes=pairs * _FP32_BYTES + p.tokens * topk * _INDEX_BYTES,
        kv_cache_read_bytes=keys * key_bytes,
        kv_cache_write_bytes=new * key_bytes,
    )
