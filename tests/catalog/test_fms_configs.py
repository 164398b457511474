"""ibm-fms's Ministral 3 defaults read from the source text (offline/catalog/fms_configs.py), on
a sample of fms/models/ministral3.py (ibm-fms 1.13.1, its lines as published, others left out)."""

from __future__ import annotations

from pathlib import Path

from offline.catalog.fms_configs import REPO, ffn_width, fms_configs
from service.catalog.models import load_model_catalog

MINISTRAL3_SAMPLE = '''
@dataclass
class Ministral3TextConfig(ModelConfig):
    src_vocab_size: int = 131072
    nheads: int = 32
    nlayers: int = 40
    hidden_grow_factor: float = 16384 / 5120  # intermediate_size / hidden_size:emb_dim
    multiple_of: int = 256  # borrowed from llama
    tie_heads: bool = False
    p_dropout: float = 0.0
    activation_fn: str = "silu"
    emb_dim: int = 5120
    head_dim: int = 128
    max_expected_seq_len: int = 262144
    kvheads: int = 8
    norm_eps: float = 1e-5
    sliding_window: Optional[int] = None  # null for ministral3 in the model itself
    rope_parameters: Dict = field(default_factory=dict)


@dataclass
class Ministral3Config(ModelConfig):
    """
    The current defaults correspond to Ministral3 14B, 8B, i.e.,
    https://huggingface.co/mistralai/Ministral-3-14B-Reasoning-2512
    """
'''

# Ministral3TextConfig by hand: FFN int(16384 / 5120 x 5120) = 16384 (a multiple of 256).
TEXT_CONFIG = {
    "model_type": "ministral3", "hidden_size": 5120, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 16384, "vocab_size": 131072, "max_position_embeddings": 262144,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def _sample(tmp_path: Path, text: str = MINISTRAL3_SAMPLE) -> Path:
    (tmp_path / "fms/models").mkdir(parents=True)
    (tmp_path / "fms/models/ministral3.py").write_text(text, encoding="utf-8")
    return tmp_path


def test_ministral3_defaults_as_its_config_json(tmp_path: Path) -> None:
    (published,) = fms_configs(_sample(tmp_path))
    assert published.repo_id == REPO and not published.verbatim
    assert published.config["model_type"] == "mistral3"
    assert published.config["text_config"] == TEXT_CONFIG


def test_without_the_docstrings_repo_nothing_is_taken(tmp_path: Path) -> None:
    text = MINISTRAL3_SAMPLE.replace("Ministral-3-14B-Reasoning-2512", "Ministral-3-8B-2512")
    assert list(fms_configs(_sample(tmp_path, text))) == []


def test_fms_ffn_rounds_up_to_multiple_of() -> None:
    assert ffn_width({"hidden_grow_factor": 8 / 3, "emb_dim": 4096, "multiple_of": 256}) == 11008
    assert ffn_width({"hidden_grow_factor": 3.5, "emb_dim": 4096, "multiple_of": None}) == 14336


def test_the_entry_counts_the_text_decoder_by_hand() -> None:
    """40 x (5120 x 4096 + 2 x 5120 x 1024 + 4096 x 5120 + 3 x 5120 x 16384) + 2 x 131072 x
    5120 = 13,505,658,880 weights, 3.5 % under the name's 14B (the vision encoder left out)."""
    raw = load_model_catalog().get(REPO).raw
    assert raw["supported"] and raw["sources"]["config"].startswith("ibm-fms 1.13.1")
    assert raw["parameters"] == 13_505_658_880
