"""Name -> factory registries for every policy kind.

A factory takes the policy's parameters (from the scenario) and a ``PolicyContext`` and returns a fresh
policy object; policies are stateful per run, so every run builds its own. An unknown name fails with the
list of known names.

Registries fill on first use: every module under ``slosched.policies`` is imported, then every module named
by an entry point of the group ``slosched.policies`` (third-party policies installed with pip; see
docs/policies.md), so their ``@register`` decorators run. The CLI, the gateway and the vLLM plugin all reach
policies through a registry, so all three see the same set.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from slosched.core.belief import OutputLengthPredictor
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.instance import InstanceSpec

PolicyT = TypeVar("PolicyT")


@dataclass(slots=True)
class PolicyContext:
    """What a policy may be built from: the instances it serves, a seeded RNG, shared predictors."""

    instances: tuple[InstanceSpec, ...]
    rng: np.random.Generator
    output_predictor: OutputLengthPredictor
    extras: dict[str, Any] = field(default_factory=dict)


Factory = Callable[[Mapping[str, Any], PolicyContext], PolicyT]


class Registry(Generic[PolicyT]):
    """A named collection of factories for one policy kind (router, ordering, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Factory[PolicyT]] = {}

    def register(self, name: str) -> Callable[[Factory[PolicyT]], Factory[PolicyT]]:
        def decorator(factory: Factory[PolicyT]) -> Factory[PolicyT]:
            if name in self._factories:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return decorator

    def names(self) -> list[str]:
        _load_builtin_policies()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        _load_builtin_policies()
        return name in self._factories

    def build(self, name: str, params: Mapping[str, Any], context: PolicyContext) -> PolicyT:
        _load_builtin_policies()
        factory = self._factories.get(name)
        if factory is None:
            raise UnknownNameError(self.kind, name, list(self._factories))
        try:
            return factory(params, context)
        except TypeError as error:
            raise ConfigError(f"{self.kind} {name!r} parameters", str(error)) from error


def param(params: Mapping[str, Any], name: str, default: Any, kind: type = float) -> Any:
    """Read one policy parameter with a type check that names the parameter."""
    value = params.get(name, default)
    try:
        return kind(value)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"parameter {name!r}", f"expected {kind.__name__}, got {value!r}") from error


def reject_unknown_params(policy: str, params: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(f"{policy} parameters", f"unknown {sorted(unknown)}; allowed: {sorted(allowed) or '(none)'}")


ENTRY_POINT_GROUP = "slosched.policies"


class PolicyPluginError(ConfigError):
    """A third-party policy module (an entry point of ``ENTRY_POINT_GROUP``) failed to load."""

    def __init__(self, entry: importlib.metadata.EntryPoint, error: BaseException) -> None:
        dist = getattr(entry, "dist", None)  # None for an entry point not read from an installed package
        where = f" (distribution {dist.name!r})" if dist is not None else ""
        super().__init__(
            f"entry point {entry.name!r} = {entry.value!r} in group {ENTRY_POINT_GROUP!r}{where}",
            f"failed to load: {type(error).__name__}: {error}; fix or uninstall that package",
        )
        self.entry_name = entry.name


def _load_builtin_policies() -> None:
    """Fill the registries (once); a broken third-party module raises the same error on every use, so a
    run never proceeds with half of its policies."""
    error = _load_all_policies()
    if error is not None:
        raise error


@functools.cache
def _load_all_policies() -> PolicyPluginError | None:
    import slosched.policies as root

    for module in pkgutil.walk_packages(root.__path__, prefix="slosched.policies."):
        importlib.import_module(module.name)
    # Sorted: registration order (and a name clash error) must not depend on the install order.
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        try:
            loaded = entry.load()
            # ``module:function`` entries name a registration hook; plain module entries register on import.
            if callable(loaded):
                loaded()
        except Exception as error:  # any failure of foreign code: reported with the entry point's name
            return PolicyPluginError(entry, error)
    return None
