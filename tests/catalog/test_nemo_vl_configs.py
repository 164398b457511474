"""nemo-toolkit's Qwen2-VL / Qwen2.5-VL dataclasses read from the source text
(offline/catalog/nemo_configs.qwen_vl_configs), on samples of nemo-toolkit 2.7.3's qwen2vl.py,
qwen2.py, vlm/inference/base.py and vlm/recipes/qwen2vl_2b.py (their lines as published, others
left out)."""

from __future__ import annotations

from pathlib import Path

from offline.catalog.entries import architecture_document
from offline.catalog.nemo_configs import qwen_vl_configs
from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog

QWEN_VL = """
@dataclass
class Qwen2VLConfig2B(Qwen2VLConfig):
    language_transformer_config: TransformerConfig = field(
        default_factory=lambda: Qwen2Config1P5B(share_embeddings_and_output_weights=True)
    )


@dataclass
class Qwen25VLConfig7B(Qwen2VLConfig):
    language_transformer_config: TransformerConfig = field(default_factory=lambda: Qwen25Config7B())
    vision_projection_config: TransformerConfig = field(
        default_factory=lambda: MultimodalProjectorConfig(
            projector_type="mcore_mlp", input_size=5120, hidden_size=3584, ffn_hidden_size=5120
        )
    )
"""
QWEN2 = """
@dataclass
class Qwen2Config(GPTConfig):
    activation_func: Callable = F.silu
    add_qkv_bias: bool = True
    seq_length: int = 4096
    vocab_size: int = 151936
    share_embeddings_and_output_weights: Optional[bool] = False
    layernorm_epsilon: float = 1e-6
    rotary_base: float = 1000000.0


@dataclass
class Qwen2Config1P5B(Qwen2Config):
    num_layers: int = 28
    hidden_size: int = 1536
    num_attention_heads: int = 12
    num_query_groups: int = 2
    ffn_hidden_size: int = 8960


@dataclass
class Qwen2Config7B(Qwen2Config):
    num_layers: int = 28
    hidden_size: int = 3584
    num_attention_heads: int = 28
    num_query_groups: int = 4
    ffn_hidden_size: int = 18944
    vocab_size: int = 152064


@dataclass
class Qwen25Config7B(Qwen2Config7B):
    seq_length: int = 131072
"""
INFERENCE = """
        if model_config.vision_projection_config.hidden_size == 2048:
            model_id = "Qwen/Qwen2.5-VL-3B-Instruct"
        elif model_config.vision_projection_config.hidden_size == 3584:
            model_id = "Qwen/Qwen2.5-VL-7B-Instruct"
"""
RECIPE = 'HF_MODEL_NAME = "Qwen/Qwen2-VL-2B-Instruct"\n'

# Qwen2VLConfig2B by hand: Qwen2Config1P5B's figures, the override tying the embeddings.
QWEN2_VL_2B = {
    "model_type": "qwen2_vl", "num_hidden_layers": 28, "hidden_size": 1536,
    "intermediate_size": 8960, "num_attention_heads": 12, "num_key_value_heads": 2,
    "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu",
    "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}  # fmt: skip


def _sample(tmp_path: Path) -> Path:
    files = {
        "nemo/collections/vlm/qwen2vl/model/qwen2vl.py": QWEN_VL,
        "nemo/collections/llm/gpt/model/qwen2.py": QWEN2,
        "nemo/collections/vlm/inference/base.py": INFERENCE,
        "nemo/collections/vlm/recipes/qwen2vl_2b.py": RECIPE,
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_each_dataclass_gets_the_repo_its_recipe_or_projector_width_names(
    tmp_path: Path,
) -> None:
    found = {repo: config for repo, _, config in qwen_vl_configs(_sample(tmp_path))}
    assert sorted(found) == ["Qwen/Qwen2-VL-2B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"]
    assert found["Qwen/Qwen2-VL-2B-Instruct"] == QWEN2_VL_2B
    assert found["Qwen/Qwen2.5-VL-7B-Instruct"]["model_type"] == "qwen2_5_vl"


def test_nemo_7b_figures_read_as_the_published_config_json(tmp_path: Path) -> None:
    """Qwen25VLConfig7B written as config.json keys reads as the entry built from
    Qwen2.5-VL-7B-Instruct's own config.json (a verbatim copy), but for the context: NeMo's
    seq_length is its training length, left out (the class default 32768, not 128000)."""
    found = {repo: config for repo, _, config in qwen_vl_configs(_sample(tmp_path))}
    ours = architecture_document(read_config(found["Qwen/Qwen2.5-VL-7B-Instruct"]).architecture)
    published = load_model_catalog().get("Qwen/Qwen2.5-VL-7B-Instruct").raw["architecture"]
    assert {k for k in ours if ours[k] != published[k]} == {"max_context_tokens"}
    assert (ours["max_context_tokens"], published["max_context_tokens"]) == (32768, 128000)


def test_the_qwen_vl_entries_count_their_text_decoder() -> None:
    """Qwen2.5-VL-3B's decoder (Qwen2.5-3B's, tied): 36 x (2048 x 2048 x 2 + 2 x 2048 x 256 +
    3 x 2048 x 11008) + 151936 x 2048 = 3,085,697,024 weights (biases and norms not counted)."""
    assert 36 * (2048 * 2048 * 2 + 2 * 2048 * 256 + 3 * 2048 * 11008) + 151936 * 2048 == (
        3_085_697_024
    )
    raw = load_model_catalog().get("Qwen/Qwen2.5-VL-3B-Instruct").raw
    assert raw["parameters"] == 3_085_697_024
    assert raw["sources"]["config"].startswith("nemo-toolkit 2.7.3")
