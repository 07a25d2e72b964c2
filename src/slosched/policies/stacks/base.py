"""Stacks: one name that sets the router, the engine and the job policy together (DESIGN 4.5).

A stack is accepted wherever a ``ROUTER+ENGINE`` pair is (``compare --policies``, a scenario's
``policies:``, the gateway's config, ``slosched up``); the vLLM plugin takes the engine preset of the same
name (an alias of the stack's engine preset). A stack's parameters live in one block,
``policy_params: {stack: {NAME: {...}}}``; each key belongs to one layer, the fields of that layer's params
dataclass, and is handed to that layer (``split_params``); an unknown key fails naming the allowed ones.

Each stack is one file named after it (``slosched.py``), registered with ``@STACKS.register("name")`` on a
function that returns its ``StackSpec``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.registry import ParamInfo, Registry, load_policies, param_infos, parse_params


def _layer_keys(registry: Registry[Any], name: str) -> frozenset[str]:
    return frozenset(item.name for item in dataclasses.fields(registry.params_of(name)))


@dataclass(slots=True, frozen=True)
class StackSpec:
    """The three registry names a stack sets (names current, not aliases)."""

    name: str
    router: str
    engine: str
    job: str

    @property
    def router_keys(self) -> frozenset[str]:
        from slosched.policies.cluster.base import ROUTERS

        return _layer_keys(ROUTERS, self.router)

    @property
    def engine_keys(self) -> frozenset[str]:
        from slosched.policies.engine.base import ENGINE_PRESETS

        return _layer_keys(ENGINE_PRESETS, self.engine)

    @property
    def job_keys(self) -> frozenset[str]:
        from slosched.policies.job.base import JOB_POLICIES

        return _layer_keys(JOB_POLICIES, self.job)

    def params(self) -> tuple[ParamInfo, ...]:
        """Every key of the stack's block: the router's, then the engine preset's, then the job policy's."""
        from slosched.policies.cluster.base import ROUTERS
        from slosched.policies.engine.base import ENGINE_PRESETS
        from slosched.policies.job.base import JOB_POLICIES

        return (
            *param_infos(ROUTERS.params_of(self.router)),
            *param_infos(ENGINE_PRESETS.params_of(self.engine)),
            *param_infos(JOB_POLICIES.params_of(self.job)),
        )

    def split_params(self, params: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(router, engine, job) parameters of the stack's one block; unknown keys fail."""
        given = dict(params or {})
        router_keys, engine_keys, job_keys = self.router_keys, self.engine_keys, self.job_keys
        allowed = router_keys | engine_keys | job_keys
        unknown = set(given) - allowed
        if unknown:
            raise ConfigError(
                f"policy_params.stack.{self.name}", f"unknown {sorted(unknown)}; allowed: {sorted(allowed) or '(none)'}"
            )

        def part(keys: frozenset[str]) -> dict[str, Any]:
            return {key: value for key, value in given.items() if key in keys}

        return part(router_keys), part(engine_keys), part(job_keys)

    def check_values(self, params: Mapping[str, Any], prefix: str) -> None:
        """Parse the block's values as each layer's parameters would be built (types, then ranges), so that a
        wrong value fails where it is given, as ``ConfigError`` naming ``{prefix}.{key}`` for a wrong type,
        rather than once a run has started."""
        from slosched.policies.cluster.base import ROUTERS
        from slosched.policies.engine.base import ENGINE_PRESETS
        from slosched.policies.job.base import JOB_POLICIES

        router, engine, job = self.split_params(params)
        parse_params(ROUTERS.params_of(self.router), router, self.router, prefix)
        parse_params(ENGINE_PRESETS.params_of(self.engine), engine, self.engine, prefix)
        parse_params(JOB_POLICIES.params_of(self.job), job, self.job, prefix)


class StackRegistry(Mapping[str, StackSpec]):
    """Stack name -> ``StackSpec``; fills with the other registries on first use."""

    def __init__(self) -> None:
        self._stacks: dict[str, StackSpec] = {}

    def register(self, name: str) -> Callable[[Callable[[], StackSpec]], Callable[[], StackSpec]]:
        def decorator(define: Callable[[], StackSpec]) -> Callable[[], StackSpec]:
            if name in self._stacks:
                raise ValueError(f"stack {name!r} registered twice")
            spec = define()
            if spec.name != name:
                raise ValueError(f"stack {name!r} defines a spec named {spec.name!r}")
            self._stacks[name] = spec
            return define

        return decorator

    def __getitem__(self, name: str) -> StackSpec:
        load_policies()
        return self._stacks[name]

    def __iter__(self) -> Iterator[str]:
        load_policies()
        return iter(sorted(self._stacks))

    def __len__(self) -> int:
        load_policies()
        return len(self._stacks)


STACKS = StackRegistry()


def stack_names() -> list[str]:
    return sorted(STACKS)
