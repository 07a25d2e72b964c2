"""An engine policy by name: a registered preset, or three parts by name with no preset file.

Two spellings, one meaning:

- text (scenario ``ROUTER+ENGINE``, the gateway's ``policies.engine``, the CLI): a preset name (``lens``),
  or ``ORDERING/ADMISSION/BATCHING`` (``urgency/always/chunked``). The params mapping of a preset goes to
  the preset; that of a parts engine holds one optional mapping per part:
  ``{ordering: {...}, admission: {...}, batching: {token_budget: 512}}``.
- mapping (the vLLM plugin's config, ``from_mapping``): ``{preset: NAME, params: {...}}``, or
  ``{ordering: NAME, admission: NAME, batching: NAME, ordering_params: {...}, admission_params: {...},
  params: {...}}`` (``params`` goes to the batching part; missing parts default to ``fcfs``/``always``/
  ``chunked``). ``preset`` wins when both are given.

Presets (``presets/<name>.py``, one file each) name combinations worth a name: the vLLM baselines, each
paper's design, the stack's engine; any other combination is written with parts. Names may be aliases
(``registry.ALIASES``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS, EnginePolicy
from slosched.policies.registry import PolicyContext, Registry

PART_SEPARATOR = "/"
PARTS = ("ordering", "admission", "batching")
MAPPING_KEYS = ("preset", *PARTS, "params", "ordering_params", "admission_params")


def _registry(part: str) -> Registry[Any]:
    registries: dict[str, Registry[Any]] = {"ordering": ORDERINGS, "admission": ADMISSIONS, "batching": BATCHINGS}
    return registries[part]


def _params(value: Any, field_name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(field_name, f"expected a mapping of parameters, got {value!r}")
    return dict(value)


def _part_name(value: Any, field_name: str, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise ConfigError(field_name, f"expected a name, got {value!r}; allowed: {_registry_names(field_name)}")
    return value


def _registry_names(field_name: str) -> str:
    part = field_name.rsplit(".", 1)[-1]
    return ", ".join(_registry(part).names()) if part in PARTS else ", ".join(ENGINE_PRESETS.names())


@dataclass(slots=True, frozen=True)
class EngineSpec:
    """A preset (``ENGINE_PRESETS`` name) with ``params``, or an (ordering, admission, batching) triple of
    part names with their parameters (``params`` is the batching part's). Invariant: ``build`` gives fresh
    policy objects each call (engine policies are stateful per instance)."""

    preset: str | None = None
    ordering: str = "fcfs"
    admission: str = "always"
    batching: str = "chunked"
    params: Mapping[str, Any] = field(default_factory=dict)
    ordering_params: Mapping[str, Any] = field(default_factory=dict)
    admission_params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.preset or PART_SEPARATOR.join((self.ordering, self.admission, self.batching))

    @classmethod
    def parse(cls, text: str, params: Mapping[str, Any] | None = None, field_name: str = "engine") -> EngineSpec:
        """``text`` is a preset name or ``ORDERING/ADMISSION/BATCHING``; ``params`` as in the module doc."""
        text = text.strip()
        if PART_SEPARATOR not in text:
            spec = cls(preset=text, params=_params(params, f"{field_name} {text!r} parameters"))
            spec.validate(field_name)
            return spec
        names = text.split(PART_SEPARATOR)
        if len(names) != len(PARTS) or not all(names):
            raise ConfigError(field_name, f"{text!r} is not ORDERING/ADMISSION/BATCHING (e.g. urgency/always/chunked)")
        given = _params(params, f"{field_name} {text!r} parameters")
        unknown = set(given) - set(PARTS)
        if unknown:
            raise ConfigError(
                f"{field_name} {text!r} parameters", f"unknown keys {sorted(unknown)}; allowed: {list(PARTS)}"
            )
        per_part = {part: _params(given.get(part), f"{field_name} {text!r} parameters.{part}") for part in PARTS}
        spec = cls(
            ordering=names[0],
            admission=names[1],
            batching=names[2],
            params=per_part["batching"],
            ordering_params=per_part["ordering"],
            admission_params=per_part["admission"],
        )
        spec.validate(field_name)
        return spec

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], field_name: str = "engine") -> EngineSpec:
        """The mapping spelling (module doc); unknown keys fail, naming the allowed ones."""
        unknown = set(data) - set(MAPPING_KEYS)
        if unknown:
            raise ConfigError(field_name, f"unknown keys {sorted(unknown)}; allowed: {list(MAPPING_KEYS)}")
        preset = data.get("preset")
        if preset is not None and (not isinstance(preset, str) or not preset):
            raise ConfigError(f"{field_name}.preset", f"expected a name, got {preset!r}")
        spec = cls(
            preset=preset,
            ordering=_part_name(data.get("ordering"), f"{field_name}.ordering", "fcfs"),
            admission=_part_name(data.get("admission"), f"{field_name}.admission", "always"),
            batching=_part_name(data.get("batching"), f"{field_name}.batching", "chunked"),
            params=_params(data.get("params"), f"{field_name}.params"),
            ordering_params=_params(data.get("ordering_params"), f"{field_name}.ordering_params"),
            admission_params=_params(data.get("admission_params"), f"{field_name}.admission_params"),
        )
        spec.validate(field_name)
        return spec

    def validate(self, field_name: str = "engine") -> None:
        """Every name registered; the error names the field and the allowed values."""
        if self.preset is not None:
            if self.preset not in ENGINE_PRESETS:
                known = ENGINE_PRESETS.names()
                raise UnknownNameError(f"{field_name} (a preset, or ORDERING/ADMISSION/BATCHING)", self.preset, known)
            return
        for part in PARTS:
            registry = _registry(part)
            name = getattr(self, part)
            if name not in registry:
                raise UnknownNameError(f"{field_name}.{part}", name, registry.names())

    def build(self, context: PolicyContext) -> EnginePolicy:
        """Fresh policy objects for one engine; bad parameters raise ConfigError naming the part."""
        if self.preset is not None:
            policy = ENGINE_PRESETS.build(self.preset, self.params, context)
            policy.name = self.preset  # an alias keeps the name it was asked by
            return policy
        return EnginePolicy(
            name=self.name,
            ordering=ORDERINGS.build(self.ordering, self.ordering_params, context),
            admission=ADMISSIONS.build(self.admission, self.admission_params, context),
            batching=BATCHINGS.build(self.batching, self.params, context),
        )
