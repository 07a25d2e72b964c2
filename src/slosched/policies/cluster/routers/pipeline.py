"""Router ``pipeline``: a ``Profile`` built from configuration, no code.

Its parameters are the profile::

    policy:
      router: pipeline
    policy_params:
      router:
        pipeline:
          filters: [kv-fits]                     # names, or {name: ..., params: {...}}; optional
          scorers:                               # at least one unless the picker is random
            - {name: least-tokens, weight: 1}
            - {name: session-affinity, weight: 2}
            - {name: prism-latency, weight: 0.5, params: {step_slo_s: 0.05}}
          picker: {name: max, params: {combine: sum}}   # or a name; default max

Weights are >= 0 (default 1). Every unknown name or key fails at load with a ``ConfigError`` naming the
field (``pipeline.scorers[1].name``) and the allowed values. A picker's ``relax`` must name scorers of
the profile. The same profile may be given in llm-d's shape instead, ``plugins`` + ``schedulingProfiles``
(``llmd_shape.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.cluster.pipeline import FILTERS, PICKERS, SCORERS, Filter, Picker, Profile, WeightedScorer
from slosched.policies.cluster.routers.llmd_shape import translate
from slosched.policies.registry import PolicyContext, Registry, setting

_STAGE_KEYS = {"name", "params"}


@dataclass(frozen=True, slots=True)
class PipelineParams:
    filters: Sequence[Any] = setting((), "filter names, or {name, params} mappings, applied in order")
    scorers: Sequence[Any] = setting((), "scorer names, or {name, weight, params} mappings (>= 1 unless picker random)")
    picker: str | Mapping[str, Any] = setting("max", "picker name, or a {name, params} mapping")
    # llm-d's EndpointPickerConfig shape (llmd_shape.py), instead of the three above; camelCase as llm-d spells it.
    plugins: Sequence[Any] = setting((), "llm-d's shape: plugin instances {type, name, parameters}")
    schedulingProfiles: Sequence[Any] = setting((), "llm-d's shape: one profile {name, plugins: [{pluginRef, weight}]}")
    apiVersion: str = setting("", "llm-d's shape: accepted and ignored")
    kind: str = setting("", "llm-d's shape: accepted and ignored")


def _entry(value: Any, field: str, keys: set[str]) -> tuple[str, Mapping[str, Any], Mapping[str, Any]]:
    """(name, params, the whole entry) of a stage given as a name or a mapping."""
    if isinstance(value, str):
        return value, {}, {"name": value}
    if not isinstance(value, Mapping):
        raise ConfigError(field, f"expected a name or a mapping with {sorted(keys)}, got {value!r}")
    unknown = set(value) - keys
    if unknown:
        raise ConfigError(field, f"unknown keys {sorted(unknown)}; allowed: {sorted(keys)}")
    name = value.get("name")
    if not isinstance(name, str):
        raise ConfigError(f"{field}.name", f"expected a name, got {name!r}")
    params = value.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"{field}.params", f"expected a mapping, got {params!r}")
    return name, params, value


def _build(registry: Registry[Any], name: str, params: Mapping[str, Any], field: str, context: PolicyContext) -> Any:
    if name not in registry:
        raise UnknownNameError(f"{field}.name", name, registry.names())
    return registry.build(name, params, context)


def _list(value: Any, field: str) -> Sequence[Any]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(field, f"expected a list, got {value!r}")
    return value


def build_scorers(entries: Any, context: PolicyContext) -> list[WeightedScorer]:
    scorers: list[WeightedScorer] = []
    for position, value in enumerate(_list(entries, "pipeline.scorers")):
        field = f"pipeline.scorers[{position}]"
        name, params, entry = _entry(value, field, _STAGE_KEYS | {"weight"})
        weight = entry.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"{field}.weight", f"expected a finite number >= 0, got {weight!r}")
        if any(item.name == name for item in scorers):
            raise ConfigError(f"{field}.name", f"scorer {name!r} listed twice")
        scorers.append(WeightedScorer(name, _build(SCORERS, name, params, field, context), float(weight)))
    return scorers


def build_profile(params: PipelineParams | Mapping[str, Any], context: PolicyContext) -> Profile:
    """The ``Profile`` a ``pipeline`` router's parameters describe (see the module docstring)."""
    parsed: PipelineParams = ROUTERS.parse("pipeline", params)
    if parsed.plugins or parsed.schedulingProfiles:
        if parsed.filters or parsed.scorers or parsed.picker != "max":
            raise ConfigError("pipeline", "give filters/scorers/picker or llm-d's plugins/schedulingProfiles, not both")
        filters_given, scorers_given, picker_given = translate(parsed.plugins, parsed.schedulingProfiles)
        parsed = PipelineParams(filters_given, scorers_given, picker_given)
    filters: list[Filter] = []
    for position, value in enumerate(_list(parsed.filters, "pipeline.filters")):
        field = f"pipeline.filters[{position}]"
        name, stage_params, _ = _entry(value, field, _STAGE_KEYS)
        filters.append(_build(FILTERS, name, stage_params, field, context))
    scorers = build_scorers(parsed.scorers, context)
    name, picker_params, _ = _entry(parsed.picker, "pipeline.picker", _STAGE_KEYS)
    picker: Picker = _build(PICKERS, name, picker_params, "pipeline.picker", context)
    names = [item.name for item in scorers]
    relax = getattr(picker, "relax", ())
    if set(relax) - set(names):
        unknown = sorted(set(relax) - set(names))
        raise ConfigError("pipeline.picker.params.relax", f"unknown scorers {unknown}; the profile's scorers: {names}")
    if not scorers and name != "random":
        raise ConfigError("pipeline.scorers", f"picker {name!r} needs at least one scorer; known: {SCORERS.names()}")
    return Profile(filters, scorers, picker)


@ROUTERS.register("pipeline", params=PipelineParams)
def build(params: PipelineParams, context: PolicyContext) -> Profile:
    return build_profile(params, context)
