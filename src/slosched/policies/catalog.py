"""What the policy registries hold, with each policy's parameter names, for validation and ``slosched policies``.

Registries store factories, not parameter declarations; every built-in factory rejects unknown parameters
through ``registry.reject_unknown_params``, whose error lists the allowed ones. So a policy's parameter
names are read by building it once with a probe key on a one-instance context and reading that list
(cached per process). A factory that accepts the probe (a third-party policy that checks nothing) or fails
otherwise has unknown parameters: ``None``, and nothing is checked against it. Defaults are not exposed
by the registries and so are not listed.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.policies.registry import PolicyContext, Registry

_PROBE = "__slosched_probe__"
_ALLOWED = "; allowed: "


@dataclass(slots=True, frozen=True)
class PolicyEntry:
    """One registered policy; ``params`` None when its factory does not say which it takes."""

    kind: str
    name: str
    params: tuple[str, ...] | None


def registries() -> dict[str, Registry[object]]:
    """Section name -> registry, in the order ``slosched policies`` lists them."""
    from slosched.policies.cluster.base import ROUTERS
    from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS
    from slosched.policies.job.base import JOB_POLICIES

    named: dict[str, Registry[object]] = {
        "routers": ROUTERS,  # type: ignore[dict-item]
        "engine_presets": ENGINE_PRESETS,  # type: ignore[dict-item]
        "orderings": ORDERINGS,  # type: ignore[dict-item]
        "admissions": ADMISSIONS,  # type: ignore[dict-item]
        "batchings": BATCHINGS,  # type: ignore[dict-item]
        "job_policies": JOB_POLICIES,  # type: ignore[dict-item]
    }
    return named


def _probe_context() -> PolicyContext:
    from slosched.perf.output_length import HistoryOutputPredictor

    instance = InstanceSpec(name="probe", gpu="A100-80G", model="Llama-3-8B")
    return PolicyContext((instance,), np.random.default_rng(0), HistoryOutputPredictor())


@functools.cache
def param_names(section: str, name: str) -> tuple[str, ...] | None:
    """The parameter names policy ``name`` of ``section`` (a ``registries()`` key) accepts, sorted."""
    registry = registries()[section]
    try:
        registry.build(name, {_PROBE: None}, _probe_context())
    except ConfigError as error:
        text = str(error)
        if _PROBE not in text or _ALLOWED not in text:
            return None
        listed = text.rsplit(_ALLOWED, 1)[1].strip()
        if listed == "(none)":
            return ()
        try:
            names = ast.literal_eval(listed)
        except (ValueError, SyntaxError):
            return None
        return tuple(sorted(str(item) for item in names))
    except Exception:  # a foreign factory failing on the probe context: its parameters stay unknown
        return None
    return None


def catalog() -> dict[str, list[PolicyEntry]]:
    """Every registered policy per section, plus the stacks (their parameter keys from ``StackSpec``)."""
    from slosched.policies.stack import STACKS

    sections = {
        section: [PolicyEntry(registry.kind, name, param_names(section, name)) for name in registry.names()]
        for section, registry in registries().items()
    }
    sections["stacks"] = [
        PolicyEntry("stack", stack.name, tuple(sorted(stack.router_keys | stack.engine_keys | stack.job_keys)))
        for stack in STACKS.values()
    ]
    return sections
