"""Turn pydantic validation errors into ``ConfigError`` naming the field, and read generator params."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError

from slosched.core.errors import ConfigError


def config_error(error: ValidationError, where: str, skip_loc: int = 0) -> ConfigError:
    """The first error of ``error`` as a ``ConfigError`` whose field is ``where`` plus the error's path.

    ``skip_loc`` drops leading path parts (a discriminated union's tag). A ``ConfigError`` raised inside a
    validator is passed through (prefixed by ``where``), so cross-field checks keep their field name.
    """
    first = error.errors(include_url=False)[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return ConfigError(_join(where, cause.field), _message_of(cause))
    loc = first["loc"][skip_loc:]
    if not loc and first["type"].startswith("union_tag"):
        loc = ("kind",)
    path = ".".join(str(part) for part in loc) or ("json" if first["type"] == "json_invalid" else "")
    message = first["msg"]
    value = first.get("input")
    if loc and first["type"] != "missing" and not isinstance(value, dict | list):
        message += f", got {value!r}"[:200]
    return ConfigError(_join(where, path) or "value", message)


def _join(where: str, path: str) -> str:
    return f"{where}.{path}" if where and path else (where or path)


def _message_of(error: ConfigError) -> str:
    return str(error).removeprefix(f"{error.field}: ")


class Params:
    """Typed, checked access to one generator's parameters.

    Every read names the parameter in its error; ``finish()`` rejects parameters nobody read, which is
    how a misspelt parameter is caught instead of silently ignored.
    """

    def __init__(self, where: str, params: Mapping[str, Any] | None) -> None:
        if params is not None and not isinstance(params, Mapping):
            raise ConfigError(f"{where} params", f"expected a mapping, got {type(params).__name__}")
        self.where = where
        self._params: Mapping[str, Any] = params or {}
        self._read: set[str] = set()

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        return self._params.get(name, default)

    def raw(self, name: str, default: Any = None) -> Any:
        return self._get(name, default)

    def number(self, name: str, default: float | None, *, minimum: float = 0.0, strict: bool = True) -> float:
        """A finite number ``> minimum`` (``>= minimum`` when ``strict`` is False)."""
        value = self._get(name, default)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{self.where}.{name}", f"expected a number, got {value!r}")
        ok = value > minimum if strict else value >= minimum
        if not math.isfinite(value) or not ok:
            bound = f"{'>' if strict else '>='} {minimum}"
            raise ConfigError(f"{self.where}.{name}", f"must be a finite number {bound}, got {value}")
        return float(value)

    def integer(self, name: str, default: int, *, minimum: int = 1) -> int:
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{self.where}.{name}", f"expected an integer >= {minimum}, got {value!r}")
        return value

    def optional_number(self, name: str) -> float | None:
        return None if self._get(name, None) is None else self.number(name, None)

    def text(self, name: str, default: str) -> str:
        value = self._get(name, default)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{self.where}.{name}", f"expected a non-empty string, got {value!r}")
        return value

    def choice(self, name: str, default: str, allowed: Collection[str]) -> str:
        value = self._get(name, default)
        if value not in allowed:
            raise ConfigError(f"{self.where}.{name}", f"got {value!r}; allowed: {', '.join(allowed)}")
        return str(value)

    def finish(self) -> None:
        unknown = sorted(set(self._params) - self._read)
        if unknown:
            known = ", ".join(sorted(self._read)) or "(none)"
            raise ConfigError(f"{self.where} params", f"unknown {unknown}; allowed: {known}")
