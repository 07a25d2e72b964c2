"""User hardware files (YAML or JSON): GPUs and models in the units spec sheets use.

Format (every section and entry optional)::

    gpus:
      H300:                       # a new GPU: every field but efficiency_like is required
        memory_gb: 288            # GB (1e9 bytes)
        memory_bandwidth_gbps: 8000   # GB/s
        bf16_tflops: 2500         # dense (not sparse) BF16 tensor TFLOP/s
        interconnect_gbps: 900    # per-direction GPU-to-GPU GB/s (NVLink, PCIe 4.0 x16 = 32)
        price_per_hour: 6.5       # USD per GPU-hour, for cost comparisons
        efficiency_like: H100     # calibrated GPU whose fitted efficiencies it borrows (default H100)
      H100:
        price_per_hour: 2.10      # a known GPU: only the fields given change
    models:
      My-8B:                      # a new model: all but head_dim and heads (one of them) required
        params_b: 8.0             # billions, embeddings and LM head included
        layers: 32
        hidden_size: 4096
        heads: 32                 # attention heads (or head_dim: 128)
        kv_heads: 8
        intermediate_size: 14336
        vocab_size: 128256

Values are converted to the bundled ``hardware.json`` units (bytes, bytes/s, FLOP/s). Errors name the
file and the field (``hw.yaml: gpus.H300.memory_gb``) and the allowed values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slosched.core.errors import ConfigError


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class GpuEntry(_Entry):
    memory_gb: float | None = Field(default=None, gt=0)
    memory_bandwidth_gbps: float | None = Field(default=None, gt=0)
    bf16_tflops: float | None = Field(default=None, gt=0)
    interconnect_gbps: float | None = Field(default=None, ge=0)
    price_per_hour: float | None = Field(default=None, ge=0)
    efficiency_like: str | None = Field(default=None, min_length=1)

    def bundled_fields(self) -> dict[str, Any]:
        """The fields given, in ``hardware.json`` names and units."""
        scaled = {
            "memory_bytes": (self.memory_gb, 1e9),
            "bandwidth_Bps": (self.memory_bandwidth_gbps, 1e9),
            "fp16_flops": (self.bf16_tflops, 1e12),
            "interconnect_Bps": (self.interconnect_gbps, 1e9),
            "price_per_hour": (self.price_per_hour, 1.0),
        }
        fields: dict[str, Any] = {key: value * scale for key, (value, scale) in scaled.items() if value is not None}
        if self.efficiency_like is not None:
            fields["efficiency_like"] = self.efficiency_like
        return fields


class ModelEntry(_Entry):
    params_b: float | None = Field(default=None, gt=0)
    layers: int | None = Field(default=None, ge=1)
    hidden_size: int | None = Field(default=None, ge=1)
    heads: int | None = Field(default=None, ge=1)
    head_dim: int | None = Field(default=None, ge=1)
    kv_heads: int | None = Field(default=None, ge=1)
    intermediate_size: int | None = Field(default=None, ge=1)
    vocab_size: int | None = Field(default=None, ge=1)

    def bundled_fields(self) -> dict[str, Any]:
        names = {
            "params_b": self.params_b,
            "layers": self.layers,
            "hidden": self.hidden_size,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "kv_heads": self.kv_heads,
            "intermediate": self.intermediate_size,
            "vocab": self.vocab_size,
        }
        return {key: value for key, value in names.items() if value is not None}


class HardwareFile(_Entry):
    gpus: dict[str, GpuEntry] = {}
    models: dict[str, ModelEntry] = {}


GPU_FIELDS = tuple(GpuEntry.model_fields)
MODEL_FIELDS = tuple(ModelEntry.model_fields)


def read_hardware_file(path: str | os.PathLike[str]) -> HardwareFile:
    """Parse and validate one user hardware file (``.json`` as JSON, anything else as YAML)."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"hardware file {str(source)[:200]}", f"cannot read: {error}") from None
    try:
        data = json.loads(text) if source.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        kind = "JSON" if source.suffix == ".json" else "YAML"
        raise ConfigError(f"{source}", f"not valid {kind}: {error}"[:300]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}", "expected a mapping with gpus: and/or models:")
    try:
        return HardwareFile.model_validate(data)
    except ValidationError as error:
        raise _field_error(source, error) from None


def _field_error(source: Path, error: ValidationError) -> ConfigError:
    first = error.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        sections = {"gpus": GPU_FIELDS, "models": MODEL_FIELDS}
        allowed = sections[loc[0]] if len(loc) == 3 and loc[0] in sections else ("gpus", "models")
        message = f"unknown field; allowed: {', '.join(allowed)}"
    elif first["type"] != "missing" and not isinstance(first.get("input"), dict | list):
        message += f", got {first.get('input')!r}"[:80]
    return ConfigError(f"{source}: {'.'.join(loc)}", message)
