"""Mooncake traces (JSONL): ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids``.

``hash_ids`` name the prompt's 512-token blocks; equal leading ids mean a shared prefix. slosched's trace
line has one ``prefix_key`` per call whose first ``prefix_tokens`` tokens are shared with every call of
that key, i.e. a chain, while Mooncake's shared prefixes form a tree. The mapping keeps only reuse the
trace really has: a request's key is the exact block sequence of its longest prefix shared with any other
request of the (limited) trace, and ``prefix_tokens`` is that many blocks times 512 (capped at the
prompt). Requests sharing a shorter prefix of that sequence under a different key do not reuse each other
(e.g. a session's turn 2 does not reuse turn 1's blocks when turn 3 shares more with turn 2), so the
imported trace under-states prefix reuse, never over-states it. The block ids themselves are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.workloads.importers.base import TraceRow, show, where

BLOCK_TOKENS = 512


@dataclass(slots=True, frozen=True)
class MooncakeImporter:
    name: str = "mooncake"
    summary: str = "Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)"

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]:
        parsed = list(_read(path, limit))
        yield from _with_prefixes(parsed)


def _read(path: Path, limit: int | None) -> Iterator[tuple[TraceRow, tuple[int, ...]]]:
    try:
        stream = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as error:
        raise ConfigError(str(path), f"cannot read: {error.strerror or error}") from None
    with stream:
        count = 0
        for number, text in enumerate(stream, start=1):
            if limit is not None and count >= limit:
                return
            if not text.strip():
                continue
            yield _parse(text, path, number)
            count += 1


def _parse(text: str, path: Path, line: int) -> tuple[TraceRow, tuple[int, ...]]:
    try:
        record = json.loads(text.rstrip())  # so a column past the end names this line
    except json.JSONDecodeError as error:
        raise ConfigError(where(path, line, str(error.colno)), f"bad JSON: {error.msg}") from None
    if not isinstance(record, dict):
        raise ConfigError(where(path, line), f"expected a JSON object, got {show(record)}")
    stamp = _number(record, "timestamp", path, line)
    blocks = record.get("hash_ids", [])
    if not isinstance(blocks, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in blocks):
        raise ConfigError(where(path, line, "hash_ids"), f"expected a list of integers, got {show(blocks)}")
    row = TraceRow(
        arrival_s=stamp / 1000.0,
        input_tokens=_count(record, "input_length", path, line),
        output_tokens=_count(record, "output_length", path, line),
        line=line,
        template="mooncake",
    )
    return row, tuple(blocks)


def _number(record: dict[str, Any], field: str, path: Path, line: int) -> float:
    value = record.get(field)
    if value is None:
        raise ConfigError(where(path, line, field), "missing field")
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ConfigError(where(path, line, field), f"expected a number, got {show(value)}")
    return float(value)


def _count(record: dict[str, Any], field: str, path: Path, line: int) -> int:
    value = _number(record, field, path, line)
    if value < 0 or value != int(value):
        raise ConfigError(where(path, line, field), f"expected an integer >= 0, got {show(record[field])}")
    return int(value)


def _with_prefixes(parsed: list[tuple[TraceRow, tuple[int, ...]]]) -> Iterator[TraceRow]:
    # A trie of block sequences as (parent node, block) -> node, with how many requests pass each node.
    nodes: dict[tuple[int, int], int] = {}
    passing: list[int] = [0]
    paths: list[list[int]] = []
    for _, blocks in parsed:
        node, path = 0, []
        for block in blocks:
            node = nodes.setdefault((node, block), len(passing))
            if node == len(passing):
                passing.append(0)
            passing[node] += 1
            path.append(node)
        paths.append(path)
    for (row, _), path in zip(parsed, paths, strict=True):
        depth = 0
        while depth < len(path) and passing[path[depth]] >= 2:
            depth += 1
        if depth == 0:
            yield row
            continue
        tokens = min(depth * BLOCK_TOKENS, row.input_tokens)
        yield replace(row, prefix_key=f"mooncake/{path[depth - 1]}", prefix_tokens=tokens)


MOONCAKE = MooncakeImporter()
