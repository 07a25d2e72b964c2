"""Errors raised for bad input; messages name the field and the allowed values."""

from __future__ import annotations


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
