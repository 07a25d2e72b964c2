"""What the policy registries hold, with each policy's declared parameters, for validation, the scenario
schema and ``slosched policies``.

Every policy is registered with a params dataclass (``registry.Registry.register``), so a policy's
parameters (name, type, default, doc) are read from it, never by building the policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.policies.registry import ParamInfo, Registry, param_infos


@dataclass(slots=True, frozen=True)
class PolicyEntry:
    """One registered policy: its declared parameters and the old names (aliases) that stand for it."""

    kind: str
    name: str
    params: tuple[ParamInfo, ...]
    aliases: tuple[str, ...] = ()


def registries() -> dict[str, Registry[object]]:
    """Section name -> registry of what a scenario names, in the order ``slosched policies`` lists them."""
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


def pipeline_registries() -> dict[str, Registry[object]]:
    """Section name -> registry of the stages a ``pipeline`` router's profile names."""
    from slosched.policies.cluster.pipeline import FILTERS, PICKERS, SCORERS

    named: dict[str, Registry[object]] = {
        "filters": FILTERS,  # type: ignore[dict-item]
        "scorers": SCORERS,  # type: ignore[dict-item]
        "pickers": PICKERS,  # type: ignore[dict-item]
    }
    return named


def param_names(section: str, name: str) -> tuple[str, ...] | None:
    """The parameter names policy ``name`` (or an alias) of ``section`` (a ``registries()`` key) accepts,
    sorted. Never None now that every policy declares its parameters; the type says None for callers that
    still handle it."""
    registry = {**registries(), **pipeline_registries()}[section]
    return tuple(sorted(info.name for info in param_infos(registry.params_of(name))))


def catalog() -> dict[str, list[PolicyEntry]]:
    """Every registered policy per section, the pipeline's stages, then the stacks (their keys: the
    params of their router, engine preset and job policy)."""
    from slosched.policies.stacks.base import STACKS

    sections = {
        section: [
            PolicyEntry(registry.kind, name, param_infos(registry.params_of(name)), tuple(registry.aliases_of(name)))
            for name in registry.registered()
        ]
        for section, registry in {**registries(), **pipeline_registries()}.items()
    }
    sections["stacks"] = [PolicyEntry("stack", stack.name, stack.params()) for stack in STACKS.values()]
    return sections
