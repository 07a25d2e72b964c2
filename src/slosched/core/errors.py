"""Errors raised for bad input; messages name the field and the allowed values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SloschedError(Exception):
    """Base class of every error slosched raises on purpose."""


class ConfigError(SloschedError, ValueError):
    """A configuration, scenario or trace value is invalid."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownNameError(ConfigError):
    """A name (policy, GPU, model, workload) is not registered."""

    def __init__(self, field: str, name: str, known: list[str]) -> None:
        known_list = ", ".join(sorted(known)) or "(none)"
        super().__init__(field, f"unknown name {name!r}; known names: {known_list}")
        self.name = name
        self.known = sorted(known)


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest known name, or ``""``: one wording for every check."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
