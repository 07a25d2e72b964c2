"""The picker's configuration (YAML or JSON, validated with pydantic): the pool's endpoints or the Kubernetes
``InferencePool`` they come from, the policies, and the ext_proc answer's names.

The picker serves its endpoints through the gateway's own routing table, so each endpoint becomes a gateway
``BackendConfig`` (``backend_config``) and the policies are the gateway's ``PolicyConfig``: the same names,
checked against the same registries. Every error names the field (dotted path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from slosched.core.errors import ConfigError
from slosched.gateway.ops.config import BackendConfig, PolicyConfig

_STRICT = ConfigDict(extra="forbid", frozen=True)
# GIE's names (docs/proposals/004-endpoint-picker-protocol): the header and the dynamic-metadata key carry the
# same value, under the ``envoy.lb`` namespace.
DESTINATION_KEY = "x-gateway-destination-endpoint"
METADATA_NAMESPACE = "envoy.lb"
SUBSET_NAMESPACE = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"
SERVED_KEY = "x-gateway-destination-endpoint-served"


class EndpointConfig(BaseModel):
    """One model server of the pool: ``address`` is ``ip:port`` (what the answer names), the rest is what
    the router's instance spec needs (``InstanceSpec``)."""

    model_config = _STRICT
    address: str = Field(pattern=r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")
    model: str = "tiny"
    gpu: str = "cpu"
    max_concurrency: int = Field(default=32, ge=1)
    max_queue: int = Field(default=256, ge=0)
    max_model_len: int = Field(default=2048, ge=16)
    num_kv_blocks: int = Field(default=1024, ge=1)
    metrics_path: str = Field(default="/metrics", pattern=r"^/")


class KubernetesConfig(BaseModel):
    """Endpoints from an ``InferencePool`` and its ready pods (``picker/kube.py``). Pods name their model and
    GPU with labels (``model_label``, ``gpu_label``); ``defaults`` fills what a pod does not say."""

    model_config = _STRICT
    pool: str = Field(min_length=1)
    namespace: str = "default"
    refresh_s: float = Field(default=5.0, gt=0)
    model_label: str = "slosched.io/model"
    gpu_label: str = "slosched.io/gpu"
    defaults: dict[str, Any] = Field(default_factory=dict)


class PickerConfig(BaseModel):
    """The whole picker. ``fallbacks`` extra endpoints follow the primary in the answer (GIE's list, tried in
    order by the proxy on retry); each is another router decision over the endpoints not yet named."""

    model_config = _STRICT
    host: str = "0.0.0.0"
    port: int = Field(default=9002, ge=0, le=65535)
    # Prometheus /metrics (GIE's pickers serve theirs on 9090 too); null: not served.
    metrics_port: int | None = Field(default=9090, ge=0, le=65535)
    endpoints: list[EndpointConfig] = Field(default_factory=list)
    kubernetes: KubernetesConfig | None = None
    policies: PolicyConfig = Field(default_factory=PolicyConfig)
    scrape_interval_s: float = Field(default=1.0, gt=0)
    scrape_timeout_s: float = Field(default=2.0, gt=0)
    engine_state_max_age_s: float = Field(default=5.0, gt=0)
    retry_down_after_s: float = Field(default=5.0, gt=0)
    default_max_tokens: int = Field(default=256, ge=1)
    max_body_bytes: int = Field(default=4_000_000, ge=1024)
    fallbacks: int = Field(default=0, ge=0, le=8)
    destination_header: str = Field(default=DESTINATION_KEY, min_length=1)
    metadata_namespace: str = Field(default=METADATA_NAMESPACE, min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> PickerConfig:
        addresses = [endpoint.address for endpoint in self.endpoints]
        if len(set(addresses)) != len(addresses):
            raise ConfigError("endpoints", f"addresses must be unique, got {addresses}")
        if self.endpoints and self.kubernetes is not None:
            raise ConfigError("kubernetes", "give endpoints or kubernetes, not both")
        return self


def backend_config(endpoint: EndpointConfig) -> BackendConfig:
    """The gateway backend an endpoint is served as: named by its address (what the picker answers)."""
    return BackendConfig(
        name=endpoint.address,
        url=f"http://{endpoint.address}",
        model=endpoint.model,
        gpu=endpoint.gpu,
        max_concurrency=endpoint.max_concurrency,
        max_queue=endpoint.max_queue,
        max_model_len=endpoint.max_model_len,
        num_kv_blocks=endpoint.num_kv_blocks,
    )


def parse_picker_config(data: Any, where: str = "config") -> PickerConfig:
    """Validate a mapping; pydantic errors become one ConfigError naming the first bad field."""
    if not isinstance(data, dict):
        raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
    try:
        return PickerConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        cause = first.get("ctx", {}).get("error")
        field = ".".join(str(part) for part in first["loc"]) or where
        if isinstance(cause, ConfigError):  # a validator's own error names its field within its section
            if field == where or cause.field == field or cause.field.startswith(f"{field}."):
                raise cause from error
            message = str(cause)[len(cause.field) + 2 :]
            raise ConfigError(f"{field}.{cause.field}", message) from error
        raise ConfigError(field, first["msg"]) from error


def load_picker_config(path: Path) -> PickerConfig:
    """The config in ``path`` (YAML, of which JSON is a subset; ``.json`` files are read as JSON)."""
    if not path.is_file():
        raise ConfigError(str(path), "picker config file not found")
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise ConfigError(str(path), f"invalid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from error
    return parse_picker_config(data, str(path))
