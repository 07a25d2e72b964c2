"""A ``pipeline`` router's profile given in llm-d's shape: the ``plugins`` and ``schedulingProfiles`` of an
``EndpointPickerConfig`` (the Gateway API Inference Extension's endpoint picker), so a user of llm-d can
paste the scheduling part of the config they run::

    plugins:
      - {type: queue-scorer}
      - {type: kv-cache-utilization-scorer}
      - {type: prefix-cache-scorer, parameters: {hashBlockSize: 5}}
      - {type: max-score-picker}
    schedulingProfiles:
      - name: default
        plugins: [{pluginRef: queue-scorer, weight: 2}, {pluginRef: kv-cache-utilization-scorer},
                  {pluginRef: prefix-cache-scorer}, {pluginRef: max-score-picker}]

A plugin's ``type`` is one of slosched's filters, scorers or pickers (its ``parameters`` are that stage's
parameters), or one of llm-d's scheduling plugins that has a slosched counterpart (``LLMD_TYPES``; their
parameters are llm-d's own, tuned for its implementation, and are not carried over). The one profile is
applied in its order: filters, scorers with their ``weight`` (default 1), at most one picker (default
``max``). Plugins the profile does not reference (a profile handler, a parser, data-layer plugins) are
llm-d's runtime, not scheduling, and are ignored, as are ``apiVersion`` and ``kind``; the config's other
sections (flow control, data layer) have no place here. slosched runs one profile per router, so exactly one
must be given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.errors import ConfigError, did_you_mean
from slosched.policies.cluster.pipeline import FILTERS, PICKERS, SCORERS

# llm-d plugin type -> (stage, slosched name). prefix-cache-scorer becomes slosched's prefix affinity, which is
# a filter (it keeps the instances holding the longest prefix, while their load allows), not a score.
LLMD_TYPES: dict[str, tuple[str, str]] = {
    "queue-scorer": ("scorers", "least-loaded"),
    "active-request-scorer": ("scorers", "least-loaded"),
    "load-aware-scorer": ("scorers", "least-loaded"),
    "kv-cache-utilization-scorer": ("scorers", "prism-kv"),
    "session-affinity-scorer": ("scorers", "session-affinity"),
    "prefix-cache-scorer": ("filters", "cache-affinity"),
    "max-score-picker": ("picker", "max"),
    "random-picker": ("picker", "random"),
    "weighted-random-picker": ("picker", "sample"),
}
_KINDS = {"filters": "filter", "scorers": "scorer", "picker": "picker"}
_PLUGIN_KEYS = {"type", "name", "parameters"}
_REF_KEYS = {"pluginRef", "weight"}


def _stage_of(plugin_type: str, field: str) -> tuple[str, str, bool]:
    """(stage, slosched name, whether the plugin's parameters are slosched's) of a plugin type."""
    for stage, registry in (("filters", FILTERS), ("scorers", SCORERS), ("picker", PICKERS)):
        if plugin_type in registry:
            return stage, plugin_type, True
    if plugin_type in LLMD_TYPES:
        stage, name = LLMD_TYPES[plugin_type]
        return stage, name, False
    known = sorted({*FILTERS.names(), *SCORERS.names(), *PICKERS.names(), *LLMD_TYPES})
    raise ConfigError(field, f"unknown plugin type {plugin_type!r}{did_you_mean(plugin_type, known)}; allowed: {known}")


def _mapping(value: Any, field: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(field, f"expected a mapping with {sorted(keys)}, got {value!r}")
    unknown = set(value) - keys
    if unknown:
        raise ConfigError(field, f"unknown keys {sorted(unknown)}; allowed: {sorted(keys)}")
    return value


def _plugins(plugins: Sequence[Any]) -> dict[str, Mapping[str, Any]]:
    """Plugin instances by name (``name``, default ``type``)."""
    named: dict[str, Mapping[str, Any]] = {}
    for position, value in enumerate(plugins):
        field = f"pipeline.plugins[{position}]"
        plugin = _mapping(value, field, _PLUGIN_KEYS)
        if not isinstance(plugin.get("type"), str):
            raise ConfigError(f"{field}.type", f"expected a plugin type, got {plugin.get('type')!r}")
        name = plugin.get("name", plugin["type"])
        if name in named:
            raise ConfigError(f"{field}.name", f"{name!r} is defined twice; give each instance its own name")
        named[name] = plugin
    return named


def translate(plugins: Sequence[Any], profiles: Sequence[Any]) -> tuple[list[Any], list[Any], Any]:
    """(filters, scorers, picker) in ``pipeline``'s own shape, from llm-d's (module doc)."""
    if isinstance(profiles, str) or not isinstance(profiles, Sequence) or len(profiles) != 1:
        count = len(profiles) if isinstance(profiles, Sequence) and not isinstance(profiles, str) else profiles
        raise ConfigError(
            "pipeline.schedulingProfiles", f"expected exactly one profile (one per router), got {count!r}"
        )
    named = _plugins(plugins)
    profile = _mapping(profiles[0], "pipeline.schedulingProfiles[0]", {"name", "plugins"})
    stages: dict[str, list[Any]] = {"filters": [], "scorers": [], "picker": []}
    for position, value in enumerate(profile.get("plugins", ())):
        field = f"pipeline.schedulingProfiles[0].plugins[{position}]"
        ref = _mapping(value, field, _REF_KEYS)
        plugin = named.get(ref.get("pluginRef"))  # type: ignore[arg-type]
        if plugin is None:
            wanted = ref.get("pluginRef")
            hint = did_you_mean(wanted, named)
            raise ConfigError(f"{field}.pluginRef", f"no plugin named {wanted!r}{hint}; defined: {sorted(named)}")
        stage, name, own_params = _stage_of(plugin["type"], f"{field} (type)")
        entry: dict[str, Any] = {"name": name, "params": dict(plugin.get("parameters") or {}) if own_params else {}}
        if stage == "scorers":
            entry["weight"] = ref.get("weight", 1)
        elif "weight" in ref:
            raise ConfigError(f"{field}.weight", f"only scorers take a weight; {plugin['type']!r} is a {_KINDS[stage]}")
        stages[stage].append(entry)
    if len(stages["picker"]) > 1:
        raise ConfigError("pipeline.schedulingProfiles[0].plugins", "a profile has at most one picker")
    return stages["filters"], stages["scorers"], (stages["picker"] or ["max"])[0]
