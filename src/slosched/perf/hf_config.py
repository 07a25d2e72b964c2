"""A model's shape from its Hugging Face ``config.json`` (as BLIS and Vidur take it), instead of typing it
into a hardware file.

``--model PATH`` (a ``config.json`` or a model directory holding one) and a scenario instance's ``model:``
field accept such a path wherever they accept a model name (:func:`slosched.perf.hardware.model_facts`
resolves it). The fields read are those of the dense decoder architectures below; the parameter count is
derived from the shape (embeddings, LM head unless tied, attention, MLP, norms), since configs do not carry
it. Mixture-of-experts configs are refused, naming the field that says so: the roofline streams every
weight each step, which an MoE model does not. Errors name the file and the field.

This module returns plain dicts in ``hardware.json`` field names (``layers``, ``hidden`` ...) so that
``perf/hardware.py`` can build its ``ModelFacts`` from them without importing it back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError


@dataclass(slots=True, frozen=True)
class Architecture:
    """How one HF architecture names its fields and builds its blocks."""

    gated_mlp: bool  # SwiGLU/GeGLU (gate, up, down) rather than up/down
    tied_default: bool  # ``tie_word_embeddings`` when the config omits it (the config class's default)
    intermediate_field: str = "intermediate_size"
    has_kv_heads: bool = True  # grouped-query attention (``num_key_value_heads``); False: one KV head per head
    learned_positions: bool = False  # OPT: a (max_position_embeddings + 2) x hidden position table


_LLAMA_LIKE = Architecture(gated_mlp=True, tied_default=False)
ARCHITECTURES: Mapping[str, Architecture] = {
    "LlamaForCausalLM": _LLAMA_LIKE,
    "MistralForCausalLM": _LLAMA_LIKE,
    "Qwen2ForCausalLM": _LLAMA_LIKE,
    "Qwen3ForCausalLM": _LLAMA_LIKE,
    "Phi3ForCausalLM": _LLAMA_LIKE,
    "GemmaForCausalLM": Architecture(gated_mlp=True, tied_default=True),
    "Gemma2ForCausalLM": Architecture(gated_mlp=True, tied_default=True),
    "OPTForCausalLM": Architecture(
        gated_mlp=False, tied_default=True, intermediate_field="ffn_dim", has_kv_heads=False, learned_positions=True
    ),
    "GPTNeoXForCausalLM": Architecture(gated_mlp=False, tied_default=False, has_kv_heads=False),
}
# ``model_type`` (the config's other name for its class) where ``architectures`` is absent.
MODEL_TYPES: Mapping[str, str] = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "opt": "OPTForCausalLM",
    "gpt_neox": "GPTNeoXForCausalLM",
}
# Fields by which MoE configs say they route tokens to experts (Mixtral, Qwen2/3-MoE, DeepSeek, DBRX ...).
MOE_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok")


def looks_like_config(name: str) -> bool:
    """Whether a model name is meant as a path (a ``.json`` file or anything with a path separator, or an
    existing directory) rather than a catalog name: catalog names hold neither."""
    return name.endswith(".json") or "/" in name or os.sep in name or Path(name).is_dir()


def config_path(name: str | os.PathLike[str]) -> Path:
    """The ``config.json`` that ``name`` (a file, or a model directory) means; errors name the path."""
    path = Path(name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(
            "model", f"no Hugging Face config at {str(path)[:200]} (give a config.json or a model directory)"
        )
    return path


def read_config(name: str | os.PathLike[str]) -> dict[str, Any]:
    """The shape of the model whose HF config ``name`` is, in ``hardware.json`` fields, with ``gated_mlp``
    and ``tied_embeddings`` and the derived ``params_b``."""
    path = config_path(name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(str(path), f"not a readable JSON config: {error}"[:300]) from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "expected a JSON object (a Hugging Face config.json)")
    return shape_of(data, str(path))


def architecture_of(data: Mapping[str, Any], where: str) -> tuple[str, Architecture]:
    names = data.get("architectures")
    if names is None and isinstance(data.get("model_type"), str):
        names = [MODEL_TYPES.get(data["model_type"], data["model_type"])]
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        raise ConfigError(
            f"{where}: architectures", f'expected a list such as ["LlamaForCausalLM"], got {names!r}'[:200]
        )
    for name in names:
        if name in ARCHITECTURES:
            return name, ARCHITECTURES[name]
    supported = ", ".join(sorted(ARCHITECTURES))
    raise ConfigError(f"{where}: architectures", f"unsupported {names[0]!r}; supported: {supported}")


def shape_of(data: Mapping[str, Any], where: str = "config.json") -> dict[str, Any]:
    """The shape fields of one parsed HF config (see :func:`read_config`)."""
    _refuse_moe(data, where)
    name, arch = architecture_of(data, where)
    heads = _positive(data, "num_attention_heads", where)
    kv_heads = _positive(data, "num_key_value_heads", where, default=heads) if arch.has_kv_heads else heads
    hidden = _positive(data, "hidden_size", where)
    head_dim = _positive(data, "head_dim", where, default=0)
    if not head_dim and hidden % heads:
        raise ConfigError(f"{where}: num_attention_heads", f"must divide hidden_size ({hidden}) or give head_dim")
    if heads % kv_heads:
        raise ConfigError(f"{where}: num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv_heads}")
    if arch.learned_positions and data.get("word_embed_proj_dim", hidden) != hidden:
        raise ConfigError(
            f"{where}: word_embed_proj_dim", f"must equal hidden_size ({hidden}) (projected embeddings unsupported)"
        )
    tied = data.get("tie_word_embeddings", arch.tied_default)
    if not isinstance(tied, bool):
        raise ConfigError(f"{where}: tie_word_embeddings", f"must be true or false, got {tied!r}"[:120])
    shape: dict[str, Any] = {
        "architecture": name,
        "layers": _positive(data, "num_hidden_layers", where),
        "hidden": hidden,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate": _positive(data, arch.intermediate_field, where),
        "vocab": _positive(data, "vocab_size", where),
        "gated_mlp": arch.gated_mlp,
        "tied_embeddings": tied,
    }
    positions = _positive(data, "max_position_embeddings", where, default=2048) + 2 if arch.learned_positions else 0
    shape["params_b"] = param_count(shape, positions) / 1e9
    return shape


def param_count(shape: Mapping[str, Any], positions: int = 0) -> int:
    """Parameters of a dense decoder of this shape: embeddings (and the LM head unless tied), per layer
    Q/K/V/O and the MLP and two norms, a final norm, and ``positions`` learned position vectors. Biases
    are left out (under 0.1% for the architectures read here)."""
    hidden, layers = int(shape["hidden"]), int(shape["layers"])
    head_dim = int(shape["head_dim"]) or hidden // int(shape["heads"])
    q_dim, kv_dim = int(shape["heads"]) * head_dim, int(shape["kv_heads"]) * head_dim
    attention = 2 * hidden * q_dim + 2 * hidden * kv_dim
    mlp = (3 if shape["gated_mlp"] else 2) * hidden * int(shape["intermediate"])
    embeddings = (1 if shape["tied_embeddings"] else 2) * int(shape["vocab"]) * hidden
    return embeddings + layers * (attention + mlp + 2 * hidden) + hidden + positions * hidden


def _refuse_moe(data: Mapping[str, Any], where: str) -> None:
    for field in MOE_FIELDS:
        value = data.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            raise ConfigError(
                f"{where}: {field}",
                f"mixture-of-experts configs are not supported (got {value}); dense architectures: "
                + ", ".join(sorted(ARCHITECTURES)),
            )


def _positive(data: Mapping[str, Any], field: str, where: str, default: int | None = None) -> int:
    value = data.get(field)
    if value is None:
        if default is None:
            raise ConfigError(f"{where}: {field}", "required (a positive integer)")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: {field}", f"must be a positive integer, got {value!r}"[:120])
    return value
