"""Errors raised for bad input; messages name the field and the allowed values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class SloschedError(Exception):
    """Base class of every error slosched raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its message and attributes, rebuilt without calling ``__init__`` again. Why: a process
        pool's worker sends a task's error back pickled, and the default rebuild calls ``__init__`` with the
        formatted message alone, which a subclass taking a field and a message rejects; the pool then
        reported a broken process instead of the error (``bench attainment`` with a bad stack setting)."""
        return (_restored, (type(self), self.args, dict(self.__dict__)))


def _restored(kind: type[SloschedError], args: tuple[Any, ...], state: dict[str, Any]) -> SloschedError:
    error = kind.__new__(kind)
    error.args = args
    error.__dict__.update(state)
    return error


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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a long run, carrying what finished (``partial``, the raiser's type; None: nothing) so
    the command writes it, flagged partial, before it exits 130. A ``KeyboardInterrupt``, so code that does
    not know it still stops as on Ctrl-C."""

    def __init__(self, partial: Any = None) -> None:
        super().__init__("interrupted")
        self.partial = partial


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest known name, or ``""``: one wording for every check."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
