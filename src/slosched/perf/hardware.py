"""GPU and model facts: the bundled ``perf/data/hardware.json`` merged with users' hardware files.

Facts are read once and returned as frozen dataclasses; an unknown name raises
:class:`~slosched.core.errors.UnknownNameError` naming the field and the known names.

User files (format in :mod:`slosched.perf.hardware_file`) are merged in order over the bundled data by
:func:`load_hardware`. The lookups below (``gpu_facts`` ...) use the *active* catalog: the bundled data
plus the files listed in ``$SLOSCHED_HARDWARE`` (``os.pathsep``-separated), which ``--hardware FILE`` on
the CLI and :func:`use_hardware` (for a scenario's ``hardware:`` key) extend.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from types import MappingProxyType
from typing import Any

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.perf.hardware_file import read_hardware_file
from slosched.perf.hf_config import config_path, looks_like_config, read_config

# Vidur (and most papers) say "A100" for the 80 GB SXM part.
GPU_ALIASES: Mapping[str, str] = MappingProxyType({"A100": "A100-80G"})


@dataclass(slots=True, frozen=True)
class GpuFacts:
    """Peak dense bf16 tensor FLOP/s, peak memory bandwidth (bytes/s) and memory (bytes) of one GPU.

    ``interconnect_Bps``: per-direction GPU-to-GPU bandwidth (0 = unknown); ``price_per_hour``: assumed
    USD per GPU-hour (None = unknown); ``efficiency_like``: for a GPU without fitted efficiencies, the
    calibrated GPU whose efficiencies the roofline borrows (None = the calibrated default).
    """

    name: str
    fp16_flops: float
    bandwidth_Bps: float
    memory_bytes: float
    interconnect_Bps: float = 0.0
    price_per_hour: float | None = None
    efficiency_like: str | None = None


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
    head_size: int = 0  # 0: hidden // heads (models whose head dim differs set it)
    # Known from a Hugging Face config (``perf/hf_config.py``); None: inferred from ``params_b``.
    gated_mlp: bool | None = None

    @property
    def num_params(self) -> float:
        return self.params_b * 1e9

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (or V) projection: ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        """Width of the Q projection (and the O input): ``heads * head_dim``, which is ``hidden`` unless the
        model sets its own head dim (Gemma, small Qwen3)."""
        return self.heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """3 for a gated MLP (Llama, Qwen), 2 for a plain one (OPT).

        Inferred from ``params_b`` unless a config said which, so a new model in the JSON needs no code.
        """
        if self.gated_mlp is not None:
            return 3 if self.gated_mlp else 2
        attn = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        embed = self.vocab * self.hidden

        def error(num_matrices: int) -> float:
            body = self.layers * (attn + num_matrices * self.hidden * self.intermediate)
            # Embeddings may be tied (one vocab matrix) or not (two); take the closer reading.
            return min(abs(body + k * embed - self.num_params) for k in (1, 2))

        return 3 if error(3) <= error(2) else 2

    @property
    def layer_linear_params(self) -> int:
        """Weights of the dense projections of one layer (QKV, O, MLP); norms are negligible."""
        attn = 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim
        return attn + self.mlp_matrices * self.hidden * self.intermediate

    @property
    def linear_params(self) -> int:
        """Dense projection weights of all layers, excluding embeddings and the LM head."""
        return self.layers * self.layer_linear_params

    @property
    def lm_head_params(self) -> int:
        return self.vocab * self.hidden


HARDWARE_ENV = "SLOSCHED_HARDWARE"
_GPU_REQUIRED = {
    "memory_bytes": "memory_gb",
    "bandwidth_Bps": "memory_bandwidth_gbps",
    "fp16_flops": "bf16_tflops",
    "interconnect_Bps": "interconnect_gbps",
    "price_per_hour": "price_per_hour",
}
_MODEL_REQUIRED = {
    "params_b": "params_b",
    "layers": "layers",
    "hidden": "hidden_size",
    "kv_heads": "kv_heads",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
}


@dataclass(slots=True, frozen=True)
class HardwareCatalog:
    """Known GPUs and models (canonical names); ``files`` are the user files merged over the bundled data."""

    gpus: Mapping[str, GpuFacts]
    models: Mapping[str, ModelFacts]
    files: tuple[str, ...] = ()

    def gpu(self, name: str) -> GpuFacts:
        canonical = GPU_ALIASES.get(name, name)
        if canonical not in self.gpus:
            raise UnknownNameError("gpu", name, [*self.gpus, *GPU_ALIASES])
        return self.gpus[canonical]

    def model(self, name: str) -> ModelFacts:
        if name not in self.models:
            if looks_like_config(name):
                return config_model(name)
            raise UnknownNameError("model", name, list(self.models))
        return self.models[name]


@functools.cache
def _load() -> Mapping[str, Any]:
    text = resources.files("slosched.perf").joinpath("data/hardware.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return MappingProxyType(data)


def _entries(section: str) -> dict[str, Any]:
    return {k: v for k, v in _load()[section].items() if not k.startswith("_")}


def load_hardware(paths: Sequence[str | os.PathLike[str]] = ()) -> HardwareCatalog:
    """The bundled GPUs and models with the user files at ``paths`` merged over them, in order.

    A file's entry for a known name changes only the fields it gives; a new name needs every required
    field. Errors name the file and the field (``hw.yaml: gpus.H300.memory_gb``).
    """
    gpus = copy.deepcopy(_entries("gpus"))
    models = copy.deepcopy(_entries("models"))
    for path in paths:
        user = read_hardware_file(path)
        for name, gpu in user.gpus.items():
            _merge(gpus, GPU_ALIASES.get(name, name), gpu.bundled_fields(), f"{path}: gpus.{name}", _GPU_REQUIRED)
        for name, model in user.models.items():
            fields = model.bundled_fields()
            if "heads" not in fields and name not in models and "head_dim" in fields and "hidden" in fields:
                fields["heads"] = max(1, fields["hidden"] // fields["head_dim"])
            required = {**_MODEL_REQUIRED, "heads": "heads (or head_dim)"}
            _merge(models, name, fields, f"{path}: models.{name}", required)
    return HardwareCatalog(
        gpus=MappingProxyType({name: _gpu(name, row, gpus) for name, row in gpus.items()}),
        models=MappingProxyType({name: _model(name, row) for name, row in models.items()}),
        files=tuple(os.fspath(path) for path in paths),
    )


def _merge(rows: dict[str, Any], name: str, fields: dict[str, Any], where: str, required: Mapping[str, str]) -> None:
    if not name or name.startswith("_"):
        raise ConfigError(where, "a name must be non-empty and not start with '_'")
    if name in rows:
        rows[name].update(fields)
        return
    missing = [user for key, user in required.items() if key not in fields]
    if missing:
        raise ConfigError(f"{where}.{missing[0].split()[0]}", f"required for a new entry (missing: {missing})")
    rows[name] = fields


def _gpu(name: str, row: Mapping[str, Any], rows: Mapping[str, Any]) -> GpuFacts:
    like = row.get("efficiency_like")
    if like is not None and GPU_ALIASES.get(like, like) not in rows:
        raise UnknownNameError(f"gpus.{name}.efficiency_like", like, list(rows))
    price = row.get("price_per_hour")
    return GpuFacts(
        name=name,
        fp16_flops=float(row["fp16_flops"]),
        bandwidth_Bps=float(row["bandwidth_Bps"]),
        memory_bytes=float(row["memory_bytes"]),
        interconnect_Bps=float(row.get("interconnect_Bps", 0.0)),
        price_per_hour=None if price is None else float(price),
        efficiency_like=None if like is None else GPU_ALIASES.get(like, like),
    )


def _model(name: str, row: Mapping[str, Any]) -> ModelFacts:
    where = f"models.{name}"
    heads, kv_heads = int(row["heads"]), int(row["kv_heads"])
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(f"{where}.kv_heads", f"must divide heads ({heads}), got {kv_heads}")
    head_dim = int(row.get("head_dim", 0))
    if not head_dim and int(row["hidden"]) % heads:
        raise ConfigError(f"{where}.heads", f"must divide hidden_size ({row['hidden']}) or give head_dim")
    return ModelFacts(
        name=name,
        layers=int(row["layers"]),
        hidden=int(row["hidden"]),
        heads=heads,
        kv_heads=kv_heads,
        intermediate=int(row["intermediate"]),
        vocab=int(row["vocab"]),
        params_b=float(row["params_b"]),
        head_size=head_dim,
    )


def config_model(name: str) -> ModelFacts:
    """The model whose Hugging Face config is at ``name`` (a ``config.json`` or a model directory); named by
    the path as given, so instances and reports keep saying which file it was."""
    path = config_path(name)
    return _config_model(name, str(path.resolve()), path.stat().st_mtime_ns)


@functools.cache
def _config_model(name: str, path: str, stamp: int) -> ModelFacts:
    del stamp  # part of the cache key only: an edited config is read again
    shape = read_config(path)
    return replace(_model(name, shape), gated_mlp=bool(shape["gated_mlp"]))


def hardware_paths() -> tuple[str, ...]:
    """The user hardware files listed in ``$SLOSCHED_HARDWARE`` (``os.pathsep``-separated)."""
    return tuple(part for part in os.environ.get(HARDWARE_ENV, "").split(os.pathsep) if part.strip())


def active_hardware() -> HardwareCatalog:
    """The bundled catalog merged with the files of ``$SLOSCHED_HARDWARE`` (re-read when a file changes)."""
    paths = hardware_paths()
    stamps = []
    for path in paths:
        try:
            stamps.append(os.stat(path).st_mtime_ns)
        except OSError:
            raise ConfigError(HARDWARE_ENV, f"hardware file {path[:200]!r} does not exist") from None
    return _cached_catalog(paths, tuple(stamps))


@functools.cache
def _cached_catalog(paths: tuple[str, ...], stamps: tuple[int, ...]) -> HardwareCatalog:
    del stamps  # part of the cache key only: an edited file is read again
    return load_hardware(paths)


def use_hardware(paths: Sequence[str | os.PathLike[str]]) -> HardwareCatalog:
    """Validate the user files at ``paths`` and make them active for this process (appended to
    ``$SLOSCHED_HARDWARE``, so later files win); returns the active catalog.

    The process-wide route is deliberate: hardware names are resolved deep inside simulator and policy
    construction, which take names, not catalogs.
    """
    files = [os.path.abspath(os.fspath(path)) for path in paths]
    load_hardware(files)  # errors surface here, naming the file and field
    merged = list(dict.fromkeys([*hardware_paths(), *files]))
    os.environ[HARDWARE_ENV] = os.pathsep.join(merged)
    return active_hardware()


def gpu_names() -> list[str]:
    """Canonical GPU names, sorted (aliases such as ``"A100"`` are accepted but not listed)."""
    return sorted(active_hardware().gpus)


def model_names() -> list[str]:
    return sorted(active_hardware().models)


def canonical_gpu(name: str) -> str:
    """Canonical GPU name for ``name`` (resolving aliases); raises UnknownNameError if unknown."""
    return active_hardware().gpu(name).name


def gpu_facts(name: str) -> GpuFacts:
    return active_hardware().gpu(name)


def model_facts(name: str) -> ModelFacts:
    return active_hardware().model(name)


def measured_anchor_points() -> Mapping[str, Any]:
    """The raw ``measured_anchor_points`` block (read-only view), used by :mod:`slosched.perf.calibrate`."""
    return MappingProxyType(_load()["measured_anchor_points"])
