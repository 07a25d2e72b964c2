"""Name -> factory registries for every policy kind, each factory with its parameters declared.

A policy is registered with a literal name and a frozen dataclass of its parameters::

    @dataclass(frozen=True, slots=True)
    class CriticalPathParams:
        triage_factor: float = setting(1.0, "scales the least time a job needs before it is demoted")

    @JOB_POLICIES.register("critical-path", params=CriticalPathParams)
    def build(params: CriticalPathParams, context: PolicyContext) -> CriticalPathBudget: ...

The registry turns a scenario's mapping into that dataclass (``parse_params``): an unknown key fails naming
it (with a did-you-mean) and the allowed ones, a value of the wrong type fails naming the field and the
type it expects; range checks are the dataclass's own (``__post_init__``). The factory then gets the typed
object and a ``PolicyContext`` and returns a fresh policy (policies are stateful per run). Every field has
a default and a doc (``setting``), so ``slosched policies`` lists name, type, default and doc of each.

Old names stay valid as aliases (``ALIASES`` below, per registry kind): a scenario naming ``slosched`` as
its router builds the ``deadline-completion`` router, with the name it was asked by kept in the result.

Registries fill on first use: every module under ``slosched.policies`` is imported, then every module named
by an entry point of the group ``slosched.policies`` (third-party policies installed with pip; see
docs/policies.md), so their ``@register`` decorators run. The CLI, the gateway and the vLLM plugin all reach
policies through a registry, so all three see the same set.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import math
import pkgutil
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from slosched.core.belief import OutputLengthPredictor
from slosched.core.errors import ConfigError, UnknownNameError, did_you_mean
from slosched.core.instance import InstanceSpec

PolicyT = TypeVar("PolicyT")

ALIASES: Mapping[str, Mapping[str, str]] = {
    # registry kind -> old name -> current name. Old names keep working everywhere (scenario files,
    # benches, the gateway's config, the vLLM plugin) and build the same policy with the same parameters.
    "router": {"slosched": "deadline-completion"},
    "engine policy": {"slosched": "deadline-triage"},
    "engine ordering": {"saber": "saber-tiers"},
    "engine admission": {"saber": "saber-speed"},
    "job policy": {"slosched": "critical-path"},
}
"""Why each alias exists: ``slosched`` named the package, a router, an engine preset, a job policy and the
stack at once; the stack keeps it, its parts got names that say what they do. ``saber`` named an ordering,
an admission and the preset; the preset keeps it."""


@dataclass(slots=True)
class PolicyContext:
    """What a policy may be built from: the instances it serves, a seeded RNG, shared predictors."""

    instances: tuple[InstanceSpec, ...]
    rng: np.random.Generator
    output_predictor: OutputLengthPredictor
    extras: dict[str, Any] = field(default_factory=dict)


def setting(default: Any, doc: str) -> Any:
    """A parameter field: its default and one line on what it does (listed by ``slosched policies``)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class NoParams:
    """A policy that takes no parameters."""


@dataclass(frozen=True, slots=True)
class ParamInfo:
    """One declared parameter, as ``slosched policies`` lists it."""

    name: str
    type: str
    default: Any
    doc: str


def param_infos(params: type) -> tuple[ParamInfo, ...]:
    """The declared parameters of a params dataclass, in declaration order."""
    hints = typing.get_type_hints(params)
    infos = []
    for item in dataclasses.fields(params):
        if not item.init:
            continue
        default = item.default if item.default is not dataclasses.MISSING else None
        infos.append(ParamInfo(item.name, type_name(hints[item.name]), default, str(item.metadata.get("doc", ""))))
    return tuple(infos)


def type_name(hint: Any) -> str:
    """``float``, ``int | None``, ``list[str]``: how a parameter's type reads in errors and listings."""
    if hint is type(None):
        return "None"
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(repr(arg) for arg in args)
    if typing.get_origin(hint) in (tuple, list, Sequence):
        return f"list[{type_name(args[0]) if args else 'Any'}]"
    if args:
        origin = typing.get_origin(hint)
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    return getattr(hint, "__name__", str(hint))


class _WrongType(Exception):
    pass


def _coerce(value: Any, hint: Any) -> Any:
    """``value`` as a ``hint``; raises ``_WrongType`` when it is not one. Integers pass as floats (YAML
    writes ``1`` for ``1.0``) and integral floats as integers; nothing else is converted."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return _coerce(value, arg)
            except _WrongType:
                continue
        raise _WrongType
    if hint is type(None):
        if value is None:
            return None
        raise _WrongType
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise _WrongType
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise _WrongType
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        raise _WrongType
    if origin in (tuple, Sequence, list):
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise _WrongType
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return tuple(_coerce(element, item) for element in value)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _WrongType
        return value
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise _WrongType
    return value


def parse_params(params: type, given: Mapping[str, Any] | Any, owner: str, prefix: str) -> Any:
    """``given`` (a mapping from a scenario, or already a ``params`` object) as a ``params`` object.

    Unknown key: ``ConfigError`` for ``{owner} parameters`` naming it, a close match and the allowed keys.
    Wrong type: ``ConfigError`` naming ``{prefix}.{field}`` and the expected type. Ranges: the dataclass's
    ``__post_init__``."""
    if isinstance(given, params):
        return given
    if not isinstance(given, Mapping):
        raise ConfigError(f"{owner} parameters", f"expected a mapping of parameters, got {given!r}")
    hints = typing.get_type_hints(params)
    allowed = [item.name for item in dataclasses.fields(params) if item.init]
    for key in given:
        if key not in allowed:
            listed = ", ".join(sorted(allowed)) or "(none)"
            raise ConfigError(
                f"{owner} parameters",
                f"unknown parameter {key!r}{did_you_mean(str(key), allowed)}; allowed: {listed}",
            )
    values = {}
    for key, value in given.items():
        try:
            values[key] = _coerce(value, hints[key])
        except _WrongType:
            raise ConfigError(f"{prefix}.{key}", f"expected {type_name(hints[key])}, got {value!r}") from None
    return params(**values)


Factory = Callable[[Any, "PolicyContext"], PolicyT]


@dataclass(frozen=True, slots=True)
class Registration(Generic[PolicyT]):
    """A registered name: its factory and its params dataclass."""

    name: str
    factory: Factory[PolicyT]
    params: type


class Registry(Generic[PolicyT]):
    """A named collection of factories for one policy kind (router, ordering, ...), with the aliases of
    that kind from ``ALIASES``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Registration[PolicyT]] = {}
        self.aliases: Mapping[str, str] = ALIASES.get(kind, {})

    def register(
        self, name: str, params: type = NoParams
    ) -> Callable[[Callable[[Any, PolicyContext], PolicyT]], Callable[[Any, PolicyContext], PolicyT]]:
        """Register the decorated factory as ``name``, taking a ``params`` dataclass."""
        if not dataclasses.is_dataclass(params):
            raise TypeError(f"{self.kind} {name!r}: params must be a dataclass, got {params!r}")

        def decorator(factory: Callable[[Any, PolicyContext], PolicyT]) -> Callable[[Any, PolicyContext], PolicyT]:
            if name in self._entries or name in self.aliases:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = Registration(name, factory, params)
            return factory

        return decorator

    def canonical(self, name: str) -> str:
        """The registered name ``name`` stands for (itself unless it is an alias)."""
        return self.aliases.get(name, name)

    def names(self) -> list[str]:
        """Every name that builds something: registered names and aliases, sorted."""
        _load_builtin_policies()
        return sorted({*self._entries, *(alias for alias, name in self.aliases.items() if name in self._entries)})

    def registered(self) -> list[str]:
        """Registered names only (each policy once), sorted."""
        _load_builtin_policies()
        return sorted(self._entries)

    def aliases_of(self, name: str) -> list[str]:
        """The old names that stand for ``name``."""
        return sorted(alias for alias, target in self.aliases.items() if target == name)

    def __contains__(self, name: object) -> bool:
        _load_builtin_policies()
        return isinstance(name, str) and self.canonical(name) in self._entries

    def entry(self, name: str) -> Registration[PolicyT]:
        """The registration of ``name`` (or of the name it is an alias of)."""
        _load_builtin_policies()
        found = self._entries.get(self.canonical(name))
        if found is None:
            raise UnknownNameError(self.kind, name, self.names())
        return found

    def params_of(self, name: str) -> type:
        return self.entry(name).params

    def parse(self, name: str, params: Mapping[str, Any] | Any) -> Any:
        """``params`` checked against ``name``'s dataclass (see ``parse_params``)."""
        return parse_params(self.entry(name).params, params, f"{self.kind} {name}", name)

    def build(self, name: str, params: Mapping[str, Any] | Any, context: PolicyContext) -> PolicyT:
        """A fresh policy ``name`` with ``params`` (a mapping, or its params object)."""
        entry = self.entry(name)
        typed = parse_params(entry.params, params, f"{self.kind} {name}", name)
        try:
            return entry.factory(typed, context)
        except TypeError as error:
            raise ConfigError(f"{self.kind} {name!r} parameters", str(error)) from error


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


def load_policies() -> None:
    """Fill every registry now (they fill on first use anyway)."""
    _load_builtin_policies()


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
