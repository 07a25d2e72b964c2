"""Bundled workload facts: ``workloads.json`` and the Azure LLM inference traces of 2023.

Both are read once per process (``functools.cache``) and handed out read-only, so callers share them
without copying: the JSON as nested ``MappingProxyType``/tuples, the traces as non-writeable numpy arrays.
The traces are CC-BY 4.0; ``data/traces/ATTRIBUTION.md`` must ship beside them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError

AzureTraceName = Literal["conv", "code"]
AZURE_TRACE_NAMES: tuple[AzureTraceName, ...] = ("conv", "code")
_TRACE_FILES = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
_CSV_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


@dataclass(frozen=True, slots=True)
class AzureTrace:
    """One Azure 2023 trace, row for row, in file order (which is time order).

    Invariants: the three arrays have equal length; ``arrival_s`` is non-decreasing, starts at 0.0 and is
    in seconds from the first row; token counts are int64. The arrays are read-only.
    """

    name: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self.arrival_s) else 0.0


def workload_facts() -> Mapping[str, Any]:
    """The whole of ``workloads.json``, read-only (mappings are proxies, lists are tuples)."""
    return _workload_facts()


def workload_section(*path: str) -> Mapping[str, Any]:
    """A nested block of ``workloads.json``, e.g. ``workload_section("code_assistant", "tasks")``."""
    node: Any = _workload_facts()
    for depth, key in enumerate(path):
        if not isinstance(node, Mapping) or key not in node:
            known = list(node) if isinstance(node, Mapping) else []
            raise UnknownNameError("workloads.json/" + "/".join(path[:depth]), key, known)
        node = node[key]
    if not isinstance(node, Mapping):
        raise ConfigError("workloads.json/" + "/".join(path), "is a value, not a section")
    return node


def azure_trace(name: str) -> AzureTrace:
    """The bundled Azure 2023 trace ``"conv"`` or ``"code"`` (also accepted: ``"azure-conv"``)."""
    short = name.removeprefix("azure-")
    if short not in _TRACE_FILES:
        raise UnknownNameError("azure trace", name, list(_TRACE_FILES))
    return _azure_trace(short)


@functools.cache
def _workload_facts() -> Mapping[str, Any]:
    text = resources.files("slosched.workloads").joinpath("data/workloads.json").read_text("utf-8")
    frozen = _freeze(json.loads(text))
    assert isinstance(frozen, Mapping)
    return frozen


def _freeze(node: Any) -> Any:
    # Cached data is shared by every caller; freezing it means no caller can change another's workload.
    if isinstance(node, dict):
        return MappingProxyType({key: _freeze(value) for key, value in node.items()})
    if isinstance(node, list):
        return tuple(_freeze(value) for value in node)
    return node


@functools.cache
def _azure_trace(short: str) -> AzureTrace:
    path = resources.files("slosched.workloads").joinpath("data/traces", _TRACE_FILES[short])
    return parse_azure_csv(path.read_text("utf-8"), name=f"azure-{short}")


def parse_azure_csv(text: str, name: str = "azure") -> AzureTrace:
    """Parse an Azure LLM trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``) without pandas.

    Timestamps are parsed by numpy as ``datetime64[ns]``, so sub-second precision is kept exactly.
    """
    lines = text.splitlines()
    if not lines or lines[0].strip() != _CSV_HEADER:
        raise ConfigError(f"{name} header", f"expected {_CSV_HEADER!r}")
    rows = [line.split(",") for line in lines[1:] if line.strip()]
    if any(len(row) != 3 for row in rows):
        bad = next(i for i, row in enumerate(rows) if len(row) != 3)
        raise ConfigError(f"{name} row {bad + 1}", "expected 3 comma-separated columns")
    columns = list(zip(*rows, strict=True)) if rows else [(), (), ()]
    try:
        stamps = np.array(columns[0], dtype="datetime64[ns]")
        input_tokens = np.array(columns[1], dtype=np.int64)
        output_tokens = np.array(columns[2], dtype=np.int64)
    except ValueError as error:
        raise ConfigError(name, f"unparseable value: {error}") from error
    offsets_ns = (stamps - stamps[0]).astype(np.int64) if len(stamps) else np.zeros(0, np.int64)
    arrival_s = offsets_ns.astype(np.float64) / 1e9
    if np.any(np.diff(arrival_s) < 0):
        raise ConfigError(f"{name} TIMESTAMP", "rows must be in time order")
    for array in (arrival_s, input_tokens, output_tokens):
        array.flags.writeable = False
    return AzureTrace(name, arrival_s, input_tokens, output_tokens)
