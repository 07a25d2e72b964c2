"""GPU and model facts from the bundled ``perf/data/hardware.json``.

Facts are read once and returned as frozen dataclasses; an unknown name raises
:class:`~slosched.core.errors.UnknownNameError` naming the field and the known names.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from slosched.core.errors import UnknownNameError

# Vidur (and most papers) say "A100" for the 80 GB SXM part.
GPU_ALIASES: Mapping[str, str] = MappingProxyType({"A100": "A100-80G"})


@dataclass(slots=True, frozen=True)
class GpuFacts:
    """Peak dense bf16 tensor FLOP/s, peak memory bandwidth (bytes/s) and memory (bytes) of one GPU."""

    name: str
    fp16_flops: float
    bandwidth_Bps: float
    memory_bytes: float


@dataclass(slots=True, frozen=True)
class ModelFacts:
    """Decoder-only transformer shape. ``params_b`` (billions) counts embeddings and the LM head."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    params_b: float

    @property
    def num_params(self) -> float:
        return self.params_b * 1e9

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection: ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """3 for a gated MLP (Llama, Qwen), 2 for a plain one (OPT).

        Inferred from ``params_b`` rather than listed per model, so a new model in the JSON needs no code.
        """
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim
        embed = self.vocab * self.hidden

        def error(num_matrices: int) -> float:
            body = self.layers * (attn + num_matrices * self.hidden * self.intermediate)
            # Embeddings may be tied (one vocab matrix) or not (two); take the closer reading.
            return min(abs(body + k * embed - self.num_params) for k in (1, 2))

        return 3 if error(3) <= error(2) else 2

    @property
    def layer_linear_params(self) -> int:
        """Weights of the dense projections of one layer (QKV, O, MLP); norms are negligible."""
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim
        return attn + self.mlp_matrices * self.hidden * self.intermediate

    @property
    def linear_params(self) -> int:
        """Dense projection weights of all layers, excluding embeddings and the LM head."""
        return self.layers * self.layer_linear_params

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden


@functools.cache
def _load() -> Mapping[str, Any]:
    text = resources.files("slosched.perf").joinpath("data/hardware.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return MappingProxyType(data)


def _entries(section: str) -> dict[str, Any]:
    return {k: v for k, v in _load()[section].items() if not k.startswith("_")}


def gpu_names() -> list[str]:
    """Canonical GPU names, sorted (aliases such as ``"A100"`` are accepted but not listed)."""
    return sorted(_entries("gpus"))


def model_names() -> list[str]:
    return sorted(_entries("models"))


def canonical_gpu(name: str) -> str:
    """Canonical GPU name for ``name`` (resolving aliases); raises UnknownNameError if unknown."""
    gpus = _entries("gpus")
    canonical = GPU_ALIASES.get(name, name)
    if canonical not in gpus:
        raise UnknownNameError("gpu", name, [*gpus, *GPU_ALIASES])
    return canonical


@functools.cache
def gpu_facts(name: str) -> GpuFacts:
    canonical = canonical_gpu(name)
    row = _entries("gpus")[canonical]
    return GpuFacts(
        name=canonical,
        fp16_flops=float(row["fp16_flops"]),
        bandwidth_Bps=float(row["bandwidth_Bps"]),
        memory_bytes=float(row["memory_bytes"]),
    )


@functools.cache
def model_facts(name: str) -> ModelFacts:
    models = _entries("models")
    if name not in models:
        raise UnknownNameError("model", name, list(models))
    row = models[name]
    return ModelFacts(
        name=name,
        layers=int(row["layers"]),
        hidden=int(row["hidden"]),
        heads=int(row["heads"]),
        kv_heads=int(row["kv_heads"]),
        intermediate=int(row["intermediate"]),
        vocab=int(row["vocab"]),
        params_b=float(row["params_b"]),
    )


def measured_anchor_points() -> Mapping[str, Any]:
    """The raw ``measured_anchor_points`` block (read-only view), used by :mod:`slosched.perf.calibrate`."""
    return MappingProxyType(_load()["measured_anchor_points"])
