"""Every problem of a scenario at once, each naming the field as the file spells it, with a did-you-mean.

pydantic collects the per-field errors; this module turns each into a ``Problem`` (a ``ConfigError``
raised inside a validator keeps its own field and message, without pydantic's "Value error," prefix; an
unknown key lists the keys allowed there and the closest one). ``policy_params`` is a free mapping to
pydantic, so its names are checked here against the registries, and each parameter name against what
that policy accepts (``policies/catalog.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from slosched.core.errors import ConfigError, UnknownNameError, did_you_mean

_MAX_SHOWN = 64  # characters of a user's value echoed back


@dataclass(slots=True, frozen=True)
class Problem:
    field: str
    message: str


class ScenarioError(ConfigError):
    """All problems of one scenario; ``str`` has one ``field: message`` line per problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        assert problems, "a ScenarioError needs at least one problem"
        first, rest = problems[0], problems[1:]
        super().__init__(first.field, first.message + "".join(f"\n{p.field}: {p.message}" for p in rest))
        self.problems = list(problems)


def unknown_message(what: str, name: object, known: Iterable[str], label: str = "allowed") -> str:
    known = sorted(known)
    listed = ", ".join(known) if known else "(none)"
    return f"unknown {what} {_shown(name)}{did_you_mean(name, known)}; {label}: {listed}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def problems_of(error: ValidationError, root: type[BaseModel]) -> list[Problem]:
    """One ``Problem`` per pydantic error, fields as dotted paths from ``root``."""
    return [_problem(item, root) for item in error.errors(include_url=False)]


def _problem(item: Any, root: type[BaseModel]) -> Problem:
    loc = [str(part) for part in item["loc"]]
    cause = (item.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return _from_config_error(loc, cause, _model_at(root, loc) is not None)
    field = ".".join(loc) or "scenario"
    if item["type"] == "extra_forbidden":
        model = _model_at(root, loc[:-1])
        allowed = list(model.model_fields) if model is not None else []
        return Problem(field, unknown_message("key", loc[-1], allowed))
    message = str(item["msg"]).removeprefix("Value error, ")
    value = item.get("input")
    if item["type"] != "missing" and not isinstance(value, dict | list):
        message += f", got {_shown(value)}"
    if item["type"] == "literal_error":
        message += did_you_mean(value, re.findall(r"'([^']*)'", str((item.get("ctx") or {}).get("expected"))))
    return Problem(field, message)


def _from_config_error(loc: list[str], cause: ConfigError, in_model: bool) -> Problem:
    own = cause.field
    what = "name"
    if loc and own.split(".")[0] == loc[-1]:
        field = ".".join([*loc[:-1], own])
    elif loc and not in_model:  # a plain value's validator names what it checked ("router"), not where
        field, what = ".".join(loc), own.split(" (")[0]
    else:
        field = ".".join([*loc, own])
    message = str(cause).removeprefix(f"{own}: ")
    if isinstance(cause, UnknownNameError):
        message = unknown_message(what, cause.name, cause.known, "known names")
    return Problem(field, message)


def _model_at(root: type[BaseModel], path: Sequence[str]) -> type[BaseModel] | None:
    """The model class at ``path`` (list indices skipped), or None where the path leaves the models."""
    model: type[BaseModel] | None = root
    for part in path:
        if part.isdigit():
            continue
        if model is None or part not in model.model_fields:
            return None
        model = _model_in(model.model_fields[part].annotation)
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (list, tuple, UnionType, Union):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def policy_param_problems(data: Mapping[str, Any]) -> list[Problem]:
    """Unknown policy names and parameter names in ``policy_params`` (shapes are pydantic's to check)."""
    from slosched.policies.stacks.base import STACKS

    params = data.get("policy_params")
    if not isinstance(params, Mapping):
        return []
    problems: list[Problem] = []
    sections = {"router": "routers", "job": "job_policies"}
    for section, block in params.items():
        if not isinstance(block, Mapping):
            continue
        for name, given in block.items():
            field = f"policy_params.{section}.{name}"
            if not isinstance(given, Mapping):
                continue  # pydantic reports the type
            if section in sections:
                problems += _check_named(field, sections[section], str(name), given)
            elif section == "engine":
                problems += _check_engine(field, str(name), given)
            elif section == "stack":
                stack = STACKS.get(str(name))
                if stack is None:
                    problems.append(Problem(field, unknown_message("stack", name, STACKS, "known names")))
                    continue
                keys = stack.router_keys | stack.engine_keys | stack.job_keys
                problems += _check_keys(field, f"stack {name!r}", given, sorted(keys))
    return problems


def _check_named(field: str, section: str, name: str, given: Mapping[str, Any]) -> list[Problem]:
    from slosched.policies.catalog import param_names, registries

    registry = registries()[section]
    if name not in registry:
        return [Problem(field, unknown_message(registry.kind, name, registry.names(), "known names"))]
    allowed = param_names(section, name)
    return [] if allowed is None else _check_keys(field, f"{registry.kind} {name!r}", given, allowed)


def _check_engine(field: str, name: str, given: Mapping[str, Any]) -> list[Problem]:
    from slosched.policies.engine.spec import PART_SEPARATOR, PARTS

    if PART_SEPARATOR not in name:
        return _check_named(field, "engine_presets", name, given)
    names = name.split(PART_SEPARATOR)
    if len(names) != len(PARTS):
        return [Problem(field, f"{name!r} is neither a preset nor ORDERING/ADMISSION/BATCHING")]
    problems = _check_keys(field, f"engine {name!r}", given, PARTS)
    for part, part_name in zip(PARTS, names, strict=True):
        part_params = given.get(part) or {}
        if isinstance(part_params, Mapping):
            for problem in _check_named(f"{field}.{part}", f"{part}s", part_name, part_params):
                problems.append(problem)
    return problems


def _check_keys(field: str, owner: str, given: Mapping[str, Any], allowed: Sequence[str]) -> list[Problem]:
    problems = []
    for key in given:
        if key not in allowed:
            takes = f"its parameters: {', '.join(allowed)}" if allowed else "it takes no parameters"
            message = f"unknown parameter {_shown(key)} of {owner}{did_you_mean(key, allowed)}; {takes}"
            problems.append(Problem(f"{field}.{key}", message))
    return problems
