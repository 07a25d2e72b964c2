"""Policy and parameter names checked against the registries, every mistake reported (``Problem``s with
a did-you-mean): for scenarios' ``policy_params`` and the gateway's ``policies`` block alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slosched.core.errors import ConfigError, did_you_mean
from slosched.core.problems import Problem, shown, unknown_message


def check_named(field: str, section: str, name: str, given: Mapping[str, Any]) -> list[Problem]:
    from slosched.policies.catalog import param_names, registries

    registry = registries()[section]
    if name not in registry:
        return [Problem(field, unknown_message(registry.kind, name, registry.names(), "known names"))]
    allowed = param_names(section, name)
    return [] if allowed is None else check_keys(field, f"{registry.kind} {name!r}", given, allowed)


def check_engine(field: str, name: str, given: Mapping[str, Any]) -> list[Problem]:
    from slosched.policies.engine.spec import PART_SEPARATOR, PARTS

    if PART_SEPARATOR not in name:
        return check_named(field, "engine_presets", name, given)
    names = name.split(PART_SEPARATOR)
    if len(names) != len(PARTS):
        return [Problem(field, f"{name!r} is neither a preset nor ORDERING/ADMISSION/BATCHING")]
    problems = check_keys(field, f"engine {name!r}", given, PARTS)
    for part, part_name in zip(PARTS, names, strict=True):
        part_params = given.get(part) or {}
        if isinstance(part_params, Mapping):
            for problem in check_named(f"{field}.{part}", f"{part}s", part_name, part_params):
                problems.append(problem)
    return problems


def check_keys(field: str, owner: str, given: Mapping[str, Any], allowed: Sequence[str]) -> list[Problem]:
    problems = []
    for key in given:
        if key not in allowed:
            takes = f"its parameters: {', '.join(allowed)}" if allowed else "it takes no parameters"
            message = f"unknown parameter {shown(key)} of {owner}{did_you_mean(key, allowed)}; {takes}"
            problems.append(Problem(f"{field}.{key}", message))
    return problems


def pipeline_problems(field: str, given: Mapping[str, Any]) -> list[Problem]:
    """Every unknown stage name, stage key and stage parameter of a ``pipeline`` router's profile
    (``filters``, ``scorers``, ``picker``) at once; shapes (lists, weights) are the builder's to check. A
    profile in llm-d's shape (``plugins`` + ``schedulingProfiles``) is translated first; a broken one is one
    problem, named by its llm-d field."""
    if "plugins" in given or "schedulingProfiles" in given:
        from slosched.policies.cluster.routers.llmd_shape import translate

        try:
            filters, scorers, picker = translate(given.get("plugins", ()), given.get("schedulingProfiles", ()))
        except ConfigError as error:
            return [Problem(f"{field}{error.field.removeprefix('pipeline')}", str(error).split(": ", 1)[1])]
        given = {"filters": filters, "scorers": scorers, "picker": picker}
    problems: list[Problem] = []
    for key, keys in (("filters", ("name", "params")), ("scorers", ("name", "params", "weight"))):
        entries = given.get(key, ())
        if isinstance(entries, str) or not isinstance(entries, Sequence):
            continue
        for index, entry in enumerate(entries):
            problems += _stage_problems(f"{field}.{key}[{index}]", key, entry, keys)
    if "picker" in given:
        problems += _stage_problems(f"{field}.picker", "pickers", given["picker"], ("name", "params"))
    return problems


def _stage_problems(field: str, section: str, entry: Any, keys: Sequence[str]) -> list[Problem]:
    from slosched.policies.catalog import param_names, pipeline_registries

    problems: list[Problem] = []
    if isinstance(entry, Mapping):
        problems += [Problem(f"{field}.{key}", unknown_message("key", key, keys)) for key in entry if key not in keys]
        name, params = entry.get("name"), entry.get("params") or {}
    else:
        name, params = entry, {}
    if not isinstance(name, str) or not isinstance(params, Mapping):
        return problems  # the builder names the shape
    registry = pipeline_registries()[section]
    if name not in registry:
        return [
            *problems,
            Problem(f"{field}.name", unknown_message(registry.kind, name, registry.names(), "known names")),
        ]
    owner = f"{registry.kind} {name!r}"
    return problems + check_keys(f"{field}.params", owner, params, param_names(section, name) or ())
