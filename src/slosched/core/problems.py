"""Every problem of a configuration at once, each naming the field as the file spells it, with a
did-you-mean: what the scenario and gateway config loaders share.

pydantic collects the per-field errors; ``problems_of`` turns each into a ``Problem`` (a ``ConfigError``
raised inside a validator keeps its own field and message, without pydantic's "Value error," prefix; a
validator may raise ``ConfigProblems`` to report several; an unknown key lists the keys allowed there and
the closest one).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from slosched.core.errors import ConfigError, UnknownNameError, did_you_mean

_MAX_SHOWN = 64  # characters of a user's value echoed back


@dataclass(slots=True, frozen=True)
class Problem:
    field: str
    message: str


class ConfigProblems(ConfigError):
    """All problems of one configuration; ``str`` has one ``field: message`` line per problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        assert problems, "ConfigProblems needs at least one problem"
        first, rest = problems[0], problems[1:]
        super().__init__(first.field, first.message + "".join(f"\n{p.field}: {p.message}" for p in rest))
        self.problems = list(problems)


def unknown_message(what: str, name: object, known: Iterable[str], label: str = "allowed") -> str:
    known = sorted(known)
    listed = ", ".join(known) if known else "(none)"
    return f"unknown {what} {shown(name)}{did_you_mean(name, known)}; {label}: {listed}"


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def problems_of(
    error: ValidationError, root: type[BaseModel], where: str = "scenario", secret: Collection[str] = ()
) -> list[Problem]:
    """One ``Problem`` per pydantic error, fields as dotted paths from ``root``; a validator that raised
    ``ConfigProblems`` gives each of its problems, under the validated field's path. ``where`` names the
    whole document (an error at its root); the value of a field under a name in ``secret`` (API keys) is
    never echoed."""
    problems: list[Problem] = []
    for item in error.errors(include_url=False):
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigProblems):
            loc = [str(part) for part in item["loc"]]
            in_model = _model_at(root, loc) is not None
            problems += [_from_config_error(loc, ConfigError(p.field, p.message), in_model) for p in cause.problems]
        else:
            problems.append(_problem(item, root, where, secret))
    return problems


def _problem(item: Any, root: type[BaseModel], where: str, secret: Collection[str] = ()) -> Problem:
    loc = [str(part) for part in item["loc"]]
    cause = (item.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return _from_config_error(loc, cause, _model_at(root, loc) is not None)
    field = ".".join(loc) or where
    if item["type"] == "extra_forbidden":
        model = _model_at(root, loc[:-1])
        allowed = list(model.model_fields) if model is not None else []
        return Problem(field, unknown_message("key", loc[-1], allowed))
    message = str(item["msg"]).removeprefix("Value error, ")
    value = item.get("input")
    if item["type"] != "missing" and not isinstance(value, dict | list) and not secret_field(loc, secret):
        message += f", got {shown(value)}"
    if item["type"] == "literal_error":
        message += did_you_mean(value, re.findall(r"'([^']*)'", str((item.get("ctx") or {}).get("expected"))))
    return Problem(field, message)


def secret_field(loc: Sequence[str], secret: Collection[str]) -> bool:
    return any(part in secret for part in loc)


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
    """The model class at ``path`` (list indices and mapping keys skipped), or None where the path leaves
    the models."""
    model: type[BaseModel] | None = root
    keyed = False  # the part after a mapping of models is a key
    for part in path:
        if part.isdigit() or keyed:
            keyed = False
            continue
        if model is None or part not in model.model_fields:
            return None
        annotation = model.model_fields[part].annotation
        keyed = _is_mapping(annotation)
        model = _model_in(annotation)
    return model


def _is_mapping(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _is_mapping(get_args(annotation)[0])
    return get_origin(annotation) is dict or any(
        _is_mapping(a) for a in get_args(annotation) if get_origin(annotation) in (UnionType, Union)
    )


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is Annotated:
        return _model_in(get_args(annotation)[0])
    if get_origin(annotation) is dict:
        return _model_in(get_args(annotation)[1])
    if get_origin(annotation) in (list, tuple, UnionType, Union):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
