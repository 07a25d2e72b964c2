"""Model shapes from Hugging Face config.json files (``perf/hf_config.py``): per architecture, the errors,
and the resolution of a path as a model name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.perf.hardware import ModelFacts, model_facts
from slosched.perf.hf_config import param_count, read_config, shape_of

# The published configs (fields the shape needs, and a few it ignores).
LLAMA_3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
QWEN_CODER_1_5B = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "max_position_embeddings": 32768,
    "model_type": "qwen2",
    "num_attention_heads": 12,
    "num_hidden_layers": 28,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
    "vocab_size": 151936,
}
OPT_13B = {
    "architectures": ["OPTForCausalLM"],
    "ffn_dim": 20480,
    "hidden_size": 5120,
    "max_position_embeddings": 2048,
    "num_attention_heads": 40,
    "num_hidden_layers": 40,
    "vocab_size": 50272,
    "word_embed_proj_dim": 5120,
}
GEMMA_7B = {
    "architectures": ["GemmaForCausalLM"],
    "head_dim": 256,
    "hidden_size": 3072,
    "intermediate_size": 24576,
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 16,
    "vocab_size": 256000,
}
PYTHIA_1B = {
    "architectures": ["GPTNeoXForCausalLM"],
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 8,
    "num_hidden_layers": 16,
    "vocab_size": 50304,
}
PHI3_MINI = {
    "architectures": ["Phi3ForCausalLM"],
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32064,
}


def _write(tmp_path: Path, data: dict[str, Any], name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("config", "catalog"), [(LLAMA_3_8B, "Llama-3-8B"), (QWEN_CODER_1_5B, "Qwen2.5-Coder-1.5B")])
def test_shape_equals_the_catalog_entry(tmp_path: Path, config: dict[str, Any], catalog: str) -> None:
    derived = model_facts(str(_write(tmp_path, config)))
    known = model_facts(catalog)
    for field in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab", "head_dim", "mlp_matrices"):
        assert getattr(derived, field) == getattr(known, field), field
    assert derived.linear_params == known.linear_params
    # The catalog rounds (8.0, 1.5); the derived count is the published one (8.03B, 1.54B).
    assert derived.params_b == pytest.approx(known.params_b, rel=0.03)


@pytest.mark.parametrize(
    ("config", "params_b", "gated", "tied"),
    [
        (LLAMA_3_8B, 8.03, True, False),
        (QWEN_CODER_1_5B, 1.54, True, True),
        (OPT_13B, 12.85, False, True),
        (GEMMA_7B, 8.54, True, True),
        (PYTHIA_1B, 1.01, False, False),
        (PHI3_MINI, 3.82, True, False),
    ],
)
def test_each_architecture(config: dict[str, Any], params_b: float, gated: bool, tied: bool) -> None:
    """Parameter counts within 2% of the published ones (biases are left out)."""
    shape = shape_of(config)
    assert shape["gated_mlp"] is gated and shape["tied_embeddings"] is tied
    assert shape["params_b"] == pytest.approx(params_b, rel=0.02)


def test_model_type_stands_in_for_architectures_and_a_directory_for_its_config(tmp_path: Path) -> None:
    data = {key: value for key, value in LLAMA_3_8B.items() if key != "architectures"}
    _write(tmp_path, data)
    assert read_config(tmp_path)["architecture"] == "LlamaForCausalLM"
    assert model_facts(str(tmp_path)).layers == 32


def test_a_head_dim_of_its_own_counts_in_the_projections() -> None:
    """Gemma's 16 heads x 256 = 4096 is wider than its hidden size 3072: Q and O are sized by it."""
    facts = ModelFacts("g", 28, 3072, 16, 16, 24576, 256000, 8.5, head_size=256, gated_mlp=True)
    assert facts.q_dim == 4096
    assert facts.layer_linear_params == 2 * 3072 * 4096 + 2 * 3072 * 4096 + 3 * 3072 * 24576


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_hidden_layers": None}, "num_hidden_layers"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"vocab_size": "many"}, "vocab_size"),
        ({"num_key_value_heads": 7}, "num_key_value_heads"),
        ({"architectures": ["MixtralForCausalLM"]}, "architectures"),
        ({"architectures": "LlamaForCausalLM"}, "architectures"),
        ({"num_local_experts": 8, "num_experts_per_tok": 2}, "num_local_experts"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ],
)
def test_bad_configs_name_the_field(change: dict[str, Any], field: str) -> None:
    data = {key: value for key, value in {**LLAMA_3_8B, **change}.items() if value is not None}
    with pytest.raises(ConfigError) as error:
        shape_of(data, "cfg.json")
    assert f"cfg.json: {field}" in str(error.value)


def test_unsupported_architecture_lists_the_supported_ones() -> None:
    with pytest.raises(ConfigError, match=r"LlamaForCausalLM.*Qwen3ForCausalLM"):
        shape_of({**LLAMA_3_8B, "architectures": ["MambaForCausalLM"]})


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no Hugging Face config"):
        model_facts(str(tmp_path / "absent" / "config.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable JSON config"):
        model_facts(str(bad))


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 96),
    heads=st.sampled_from([8, 16, 32, 64]),
    group=st.sampled_from([1, 2, 4, 8]),
    head_dim=st.sampled_from([64, 128]),
    ratio=st.floats(2.0, 4.0),
    vocab=st.integers(1000, 260_000),
    gated=st.booleans(),
    tied=st.booleans(),
)
def test_derived_counts_agree_with_the_roofline_view(
    layers: int, heads: int, group: int, head_dim: int, ratio: float, vocab: int, gated: bool, tied: bool
) -> None:
    """The roofline's weights (projections + one vocab matrix per embedding) are within 2% of the derived
    parameter count, and the MLP kind inferred from the count alone is the config's."""
    hidden = heads * head_dim
    shape = {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": heads // group,
        "head_dim": 0,
        "intermediate": int(hidden * ratio),
        "vocab": vocab,
        "gated_mlp": gated,
        "tied_embeddings": tied,
    }
    params = param_count(shape)
    facts = ModelFacts("m", layers, hidden, heads, heads // group, int(hidden * ratio), vocab, params / 1e9)
    weights = facts.linear_params + (1 if tied else 2) * vocab * hidden
    assert weights == pytest.approx(params, rel=0.02)
    if layers * hidden * int(hidden * ratio) > 2 * vocab * hidden:  # the MLP dominates what the count can tell
        assert facts.mlp_matrices == (3 if gated else 2)
