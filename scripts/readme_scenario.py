"""The README's endpoint examples, in the order they run against one fresh service.

Each command is shown in the README exactly as written here (`$KEY` is the key the script
created; `{quote_id}` is filled from an earlier answer) and run with `bash -c`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QUOTE_ID = r'"quote_id":\s*"(q_[0-9A-Z]+)"'
AUTH = '-H "Authorization: Bearer $KEY"'
JSON = "-H 'content-type: application/json'"
PROBLEM_HEADERS = (
    "content-type",
    "www-authenticate",
    "retry-after",
    "ratelimit",
    "ratelimit-policy",
)


@dataclass(frozen=True)
class Example:
    """One README block: the command, what to keep of its answer, ids to remember."""

    name: str
    command: str
    captures: dict[str, str] = field(default_factory=dict)
    keep_headers: tuple[str, ...] = ()
    keep_lines: str = ""
    wait_s: float = 0.0
    elide: tuple[str, ...] = ()
    open_mode: bool = False


EXAMPLES: tuple[Example, ...] = (
    Example(
        "quickstart",
        f"""curl -s localhost:8000/v1/estimate {JSON} -d '{{
  "model": "meta-llama/Llama-3.1-8B-Instruct",
  "workload": {{"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256}},
  "hardware": {{"gpu": "H100-SXM5-80GB", "count": 2}},
  "datacenter": {{"region": "US-CA"}}}}'""",
        elide=("carbon.factors", "validation"),
        open_mode=True,
    ),
    Example(
        "estimate",
        f"""curl -s localhost:8123/v1/estimate {AUTH} \\
  -H 'Idempotency-Key: gw-123' {JSON} -d '{{
  "model": "meta-llama/Llama-3.1-8B-Instruct",
  "workload": {{"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256}},
  "hardware": {{"gpu": "H100-SXM5-80GB", "count": 2}},
  "datacenter": {{"region": "US-CA"}},
  "metadata": {{"request_id": "gw-123", "customer": "acme"}}}}'""",
        captures={"quote_id": QUOTE_ID},
        elide=("carbon.factors",),
    ),
    Example(
        "estimate-verbose",
        f"""curl -s 'localhost:8123/v1/estimate?verbose=true' {AUTH} {JSON} \\
  -d '{{"model": "Qwen/Qwen3-0.6B", "hardware": {{"gpu": "L4"}},
       "workload": {{"batch_size": 1, "prompt_tokens": 128, "output_tokens": 32}}}}'""",
        elide=("carbon",),
    ),
    Example(
        "batch",
        f"""curl -s localhost:8123/v1/estimate/batch {AUTH} {JSON} -d '{{"items": [
  {{"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {{"gpu": "A100-SXM4-80GB"}},
   "workload": {{"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 200}},
   "datacenter": {{"region": "FR"}}}},
  {{"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {{"gpu": "A100-80GB-SXM"}},
   "workload": {{"batch_size": 1, "prompt_tokens": 1000, "output_tokens": 200}}}}]}}'""",
        elide=("items.*.carbon", "items.*.latency"),
    ),
    Example(
        "estimate-config",
        f"""curl -s localhost:8123/v1/estimate {AUTH} {JSON} -d '{{
  "architecture": {{"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
    "max_position_embeddings": 40960, "rope_theta": 1000000.0, "torch_dtype": "bfloat16"}},
  "workload": {{"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200}},
  "hardware": {{"gpu": "H100-SXM5-80GB", "count": 2}}, "datacenter": {{"region": "FR"}}}}'""",
        elide=("carbon",),
    ),
    Example(
        "estimate-variant",
        f"""curl -s localhost:8123/v1/estimate {AUTH} {JSON} -d '{{
  "model": "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8",
  "workload": {{"batch_size": 4, "prompt_tokens": 900, "output_tokens": 200}},
  "hardware": {{"gpu": "H100-SXM5-80GB", "count": 2}}, "datacenter": {{"region": "FR"}}}}'""",
        elide=("carbon",),
    ),
    Example(
        "errors",
        f"""curl -s -i localhost:8123/v1/estimate {AUTH} {JSON} \\
  -d '{{"model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": {{"gpu": "H100", "count": 128}},
       "workload": {{"batch_size": 8, "prompt_tokens": 512, "output_tokens": 256}}}}'
curl -s -i localhost:8123/v1/quotes""",
        keep_headers=PROBLEM_HEADERS,
    ),
    Example(
        "gpus",
        "curl -s localhost:8123/v1/gpus\ncurl -s localhost:8123/v1/gpus/H100-SXM5-80GB",
        elide=("items.*",),
    ),
    Example(
        "models",
        "curl -s localhost:8123/v1/models\n"
        "curl -s localhost:8123/v1/models/meta-llama/Llama-3.1-8B-Instruct",
        elide=("items.*",),
    ),
    Example(
        "models-register",
        f"""curl -s localhost:8123/v1/models {AUTH} {JSON} -d '{{"id": "acme/llama-ft",
  "config": {{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}},
  "weights": "fp8"}}'
curl -s localhost:8123/v1/estimate {AUTH} {JSON} -d '{{"model": "acme/llama-ft",
  "workload": {{"batch_size": 1, "prompt_tokens": 512, "output_tokens": 128}},
  "hardware": {{"gpu": "H100-SXM5-80GB"}}, "datacenter": {{"region": "FR"}}}}'""",
        elide=("architecture", "config", "carbon"),
    ),
    Example(
        "models-delete",
        f"curl -s -i -X DELETE localhost:8123/v1/models/acme/llama-ft {AUTH}",
        keep_headers=("content-type",),
    ),
    Example("regions", "curl -s localhost:8123/v1/regions"),
    Example(
        "observation",
        f"""curl -s localhost:8123/v1/quotes/{{quote_id}}/observations {AUTH} \\
  -H 'Idempotency-Key: obs-gw-123' {JSON} \\
  -d '{{"gpu_j": 1290.0, "total_s": 2.31, "measured_with": "nvml",
       "measured_at": "2026-11-22T11:23:19Z"}}'""",
    ),
    Example(
        "quote",
        f"curl -s localhost:8123/v1/quotes/{{quote_id}} {AUTH}",
        elide=("response",),
    ),
    Example(
        "quotes-page",
        f"curl -s 'localhost:8123/v1/quotes?limit=2' {AUTH}",
        # A quote is listed once QUOTES_BILLING_SETTLE_S (10 s) old.
        wait_s=11.0,
    ),
    Example(
        "quotes-csv",
        f"curl -s -i 'localhost:8123/v1/quotes?limit=2&format=csv' {AUTH}",
        keep_headers=("content-type", "x-next-cursor", "x-resume-cursor"),
    ),
    Example(
        "calibration",
        f"curl -s -X POST localhost:8123/v1/calibrations {AUTH} {JSON} -d '{{}}'",
    ),
    Example("health", "curl -s localhost:8123/v1/health"),
    Example(
        "metrics",
        "curl -s localhost:8123/metrics",
        keep_lines=r"^(# (HELP|TYPE) quotes_|quotes_(http_requests_total|estimates_total|db_errors"
        r"|http_request_duration_seconds_(count|sum)))",
    ),
)
