"""``--set path.to.key=value`` overrides, applied to a scenario's YAML mapping before it is validated.

The value is read as a YAML scalar or flow collection (``200`` is an int, ``[a, b]`` a list, ``null``
None); a path steps through mappings by key and through lists by index (``backends.0.gpu``). Missing
mapping keys along the path are created, so a block absent from the file can be set; stepping into
anything else (a scalar, a list with a non-index, an index past the end) is an error naming the path.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import yaml

from slosched.core.errors import ConfigError


def parse_override(text: str) -> tuple[list[str], Any]:
    """``'a.b.0=value'`` -> (``['a', 'b', '0']``, parsed value)."""
    path, equals, raw = text.partition("=")
    field = f"--set {text[:64]}"
    if not equals or not path.strip():
        raise ConfigError(field, "expected PATH=VALUE, e.g. workload.num_jobs=200")
    keys = [key.strip() for key in path.strip().split(".")]
    if not all(keys):
        raise ConfigError(field, f"empty key in path {path.strip()!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ConfigError(field, f"value is not a YAML scalar or list: {problem}") from None
    return keys, value


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A deep copy of ``data`` with every override applied in order (a later one wins)."""
    result: dict[str, Any] = copy.deepcopy(dict(data))
    for text in overrides:
        keys, value = parse_override(text)
        _set(result, keys, value, f"--set {text[:64]}")
    return result


def _set(root: dict[str, Any], keys: list[str], value: Any, field: str) -> None:
    node: Any = root
    for depth, key in enumerate(keys):
        where = ".".join(keys[: depth + 1])
        last = depth == len(keys) - 1
        if isinstance(node, MutableMapping):
            if last:
                node[key] = value
                return
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
        elif isinstance(node, list):
            index = _index(key, len(node), where, field)
            if last:
                node[index] = value
                return
            node = node[index]
        else:
            parent = ".".join(keys[:depth])
            shown = repr(node)[:64]
            raise ConfigError(field, f"{parent!r} holds {shown}, not a mapping or list; cannot set {where!r}")


def _index(key: str, length: int, where: str, field: str) -> int:
    if not key.lstrip("-").isdigit():
        raise ConfigError(field, f"{where!r}: a list needs an index (0..{length - 1}), got {key!r}")
    index = int(key)
    if not -length <= index < length:
        raise ConfigError(field, f"{where!r}: index {index} out of range for a list of {length}")
    return index
