"""nemo-toolkit's model configs read from its source text (offline/catalog/nemo_configs.py): the
config.json copies under their comment, and the Nemotron-H dataclasses written as NemotronHConfig
keys, on a sample of nemo/collections/llm/gpt/model/ssm.py (nemo-toolkit 2.7.3, lines as
published, the classes between them left out)."""

from __future__ import annotations

from pathlib import Path

from offline.catalog.entries import architecture_document
from offline.catalog.nemo_configs import (
    config_copies,
    dataclass_fields,
    exported_repos,
    gemma3_config,
    nemo_configs,
    nemotron_h_config,
)
from service.catalog.hf_config import read_config
from service.catalog.models import load_model_catalog

SSM_SAMPLE = '''
@dataclass
class SSMConfig(TransformerConfig, io.IOMixin):
    fp16_lm_cross_entropy: bool = False
    share_embeddings_and_output_weights: bool = False
    params_dtype: torch.dtype = torch.bfloat16
    num_layers: int = 2
    mamba_num_groups: int = 8
    num_attention_heads: int = 1
    seq_length: int = 8192
    add_bias_linear: bool = False
    layernorm_epsilon: float = 1e-5
    forward_step_fn: Callable = ssm_forward_step
    mamba_stack_spec: Union[ModuleSpec, Callable[[], ModuleSpec]] = field(
        default_factory=lambda: default_mamba_stack_spec
    )


@dataclass
class NemotronHConfigBase(SSMConfig):
    """Base configuration class for NemotronH models"""

    seq_length: int = 8192
    mamba_num_groups: int = 8
    mamba_head_dim: int = 64
    num_query_groups: int = 8
    activation_func: callable = lambda x: torch.pow(F.relu(x), 2)
    vocab_size: int = 131072


@dataclass
class NemotronHConfig8B(NemotronHConfigBase):
    """NemotronHConfig8B"""

    hybrid_override_pattern: str = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    num_layers: int = 52
    hidden_size: int = 4096
    mamba_state_dim: int = 128
    ffn_hidden_size: int = 21504
    num_attention_heads: int = 32


@dataclass
class NemotronHConfig56B(NemotronHConfigBase):
    """NemotronHConfig56B"""

    hybrid_override_pattern: str = (
        "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
        "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    )
    num_layers: int = 118
    hidden_size: int = 8192
    mamba_state_dim: int = 256
    ffn_hidden_size: int = 32768
    num_attention_heads: int = 64


class HFNemotronHExporter(io.ModelConnector["MambaModel", "AutoModelForCausalLM"]):
    @property
    def config(self):
        local_model_path = os.environ.get('HF_LOCAL_MODEL_PATH')
        if type(source) == NemotronHConfig8B:
            model_path = local_model_path if local_model_path else "nvidia/Nemotron-H-8B-Base-8K"
        elif type(source) == NemotronHConfig56B:
            model_path = local_model_path if local_model_path else "nvidia/Nemotron-H-56B-Base-8K"
        else:
            raise ValueError(f"Unsupported model size: {source}")
'''

COPIES_SAMPLE = '''
# Config copy from https://huggingface.co/org/model-1B/blob/main/config.json
ORG_MODEL_1B_CONFIG = """
{
  "model_type": "llama",
  "hidden_size": 2048
}
"""
'''

# NemotronHConfig8B by hand: head_dim 4096 / 32 (kv_channels unset), mamba_num_heads
# 2 x 4096 / 64 (mamba_num_heads unset), the base's 8 KV heads, groups and 131072 tokens.
NEMOTRON_H_8B = {
    "model_type": "nemotron_h",
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "num_hidden_layers": 52, "hidden_size": 4096, "intermediate_size": 21504,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 131072, "max_position_embeddings": 8192,
    "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128,
    "conv_kernel": 4, "expand": 2, "mlp_hidden_act": "relu2", "mlp_bias": False,
    "use_bias": False, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}  # fmt: skip


GEMMA3_SAMPLE = """
@dataclass
class Gemma3Config(GPTConfig):
    seq_length: int = 131_072
    vocab_size: int = 262_208  # Gemma3 1B model has smaller embedding table
    rotary_base: tuple = (10_000, 1_000_000)  # (local, global)
    share_embeddings_and_output_weights: bool = True
    layernorm_epsilon: float = 1e-6
    window_size: tuple = 512  # local
    interleaved_attn_pattern: tuple = (5, 1)  # (local, global)
    activation_func: Callable = torch.nn.functional.gelu


@dataclass
class Gemma3Config1B(Gemma3Config):
    num_layers: int = 26
    hidden_size: int = 1152
    num_attention_heads: int = 4
    num_query_groups: int = 1
    kv_channels: int = 256
    ffn_hidden_size: int = 6912
    window_size: int = 512
    seq_length: int = 32768
    vocab_size: int = 262_144
"""
RECIPE_SAMPLE = """
from nemo.collections.llm.gpt.model.gemma3 import Gemma3Config1B, Gemma3Model
    resume_path: str = "google/gemma-3-1b-pt",
"""
# Gemma3Config1B by hand: 5 sliding layers to 1 global (pattern 6), window 512, RoPE bases
# 1e4 (local) and 1e6 (global), the 1B's own 262144-token vocabulary, tied.
GEMMA3_1B = {
    "model_type": "gemma3_text", "num_hidden_layers": 26, "hidden_size": 1152,
    "intermediate_size": 6912, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 256, "vocab_size": 262144, "max_position_embeddings": 32768,
    "sliding_window": 512, "sliding_window_pattern": 6, "rope_theta": 1_000_000,
    "rope_local_base_freq": 10_000, "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}  # fmt: skip


def _sample(tmp_path: Path) -> Path:
    folder = tmp_path / "nemo/collections/llm/gpt/model"
    folder.mkdir(parents=True)
    (folder / "ssm.py").write_text(SSM_SAMPLE, encoding="utf-8")
    (folder / "llama_nemotron_config.py").write_text(COPIES_SAMPLE, encoding="utf-8")
    (folder / "gemma3.py").write_text(GEMMA3_SAMPLE, encoding="utf-8")
    recipes = tmp_path / "nemo/collections/llm/recipes"
    recipes.mkdir(parents=True)
    (recipes / "gemma3_1b.py").write_text(RECIPE_SAMPLE, encoding="utf-8")
    # no Qwen VL dataclass here (tests/catalog/test_nemo_vl_configs.py reads them)
    (folder / "qwen2.py").write_text("", encoding="utf-8")
    for name in ("qwen2vl/model/qwen2vl.py", "inference/base.py"):
        (tmp_path / "nemo/collections/vlm" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "nemo/collections/vlm" / name).write_text("", encoding="utf-8")
    return tmp_path


def test_gemma3_1b_as_gemma3_text_keys(tmp_path: Path) -> None:
    fields = dataclass_fields(_sample(tmp_path) / "nemo/collections/llm/gpt/model/gemma3.py")
    assert gemma3_config(fields["Gemma3Config1B"]) == GEMMA3_1B
    # 26 x (1152 x (4 + 2) x 256 + 4 x 256 x 1152 + 3 x 1152 x 6912) + 262144 x 1152 (tied)
    assert 26 * (1152 * 6 * 256 + 4 * 256 * 1152 + 3 * 1152 * 6912) + 262144 * 1152 == 999_751_680
    gemma = load_model_catalog().get("google/gemma-3-1b-pt").raw
    assert gemma["parameters"] == 999_751_680


def test_dataclass_fields_follow_the_bases_and_skip_what_is_not_literal(tmp_path: Path) -> None:
    fields = dataclass_fields(_sample(tmp_path) / "nemo/collections/llm/gpt/model/ssm.py")
    eight = fields["NemotronHConfig8B"]
    assert (eight["num_layers"], eight["mamba_head_dim"], eight["vocab_size"]) == (52, 64, 131072)
    assert "activation_func" not in eight and "params_dtype" not in eight
    assert nemotron_h_config(eight) == NEMOTRON_H_8B


def test_the_exporter_names_each_classs_repo_and_the_copies_their_file(tmp_path: Path) -> None:
    root = _sample(tmp_path)
    assert exported_repos(root / "nemo/collections/llm/gpt/model/ssm.py") == {
        "NemotronHConfig8B": "nvidia/Nemotron-H-8B-Base-8K",
        "NemotronHConfig56B": "nvidia/Nemotron-H-56B-Base-8K",
    }
    assert list(config_copies(root)) == [
        ("org/model-1B", "ORG_MODEL_1B_CONFIG", {"model_type": "llama", "hidden_size": 2048})
    ]
    repos = [(p.repo_id, p.verbatim) for p in nemo_configs(root)]
    assert repos == [("org/model-1B", True), ("nvidia/Nemotron-H-8B-Base-8K", False),
                     ("nvidia/Nemotron-H-56B-Base-8K", False),
                     ("google/gemma-3-1b-pt", False)]  # fmt: skip


def test_nemo_56b_figures_read_as_nvidias_published_config_json(tmp_path: Path) -> None:
    """NeMo's NemotronHConfig56B, written as config.json keys, reads as the entry built from
    Nemotron-H-56B-Base-8K's own config.json (aiconfigurator-core's verbatim copy): the same
    architecture and 56,321,343,488 weights."""
    root = _sample(tmp_path)
    (written,) = [p for p in nemo_configs(root) if p.repo_id.endswith("56B-Base-8K")]
    published = load_model_catalog().get("nvidia/Nemotron-H-56B-Base-8K").raw
    assert "aiconfigurator-core" in published["sources"]["config"]
    ours = architecture_document(read_config(written.config).architecture)
    assert ours == published["architecture"]
    assert published["parameters"] == 56_321_343_488


def test_the_nemo_entries_are_catalogued_with_their_source() -> None:
    catalogue = load_model_catalog()
    for repo in ("nvidia/Nemotron-H-8B-Base-8K", "nvidia/Nemotron-H-47B-Base-8K",
                 "nvidia/NVIDIA-Nemotron-Nano-9B-v2-Base",
                 "nvidia/NVIDIA-Nemotron-Nano-12B-v2-Base",
                 "nvidia/Llama-3_1-Nemotron-Ultra-253B-v1"):  # fmt: skip
        raw = catalogue.get(repo).raw
        assert raw["supported"] and raw["sources"]["config"].startswith("nemo-toolkit 2.7.3")
    # a base shares its post-trained release's shape (the build's sibling check)
    base = catalogue.get("nvidia/NVIDIA-Nemotron-Nano-9B-v2-Base").raw
    post_trained = catalogue.get("nvidia/NVIDIA-Nemotron-Nano-9B-v2").raw
    assert base["parameters"] == post_trained["parameters"]
